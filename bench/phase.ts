/**
 * What the phases of `npm run bench` share: the switches several phases read, the load generator's
 * results, the run's shared things a phase measures with (BenchContext), and the shape of a phase.
 * The phases themselves are listed in bench/registry.ts.
 */
import type { Logger } from 'pino';
import type { Clock } from '../core/clock';
import type { Config } from '../server/config';
import type { Service } from '../server/service';
import type { BaselineProcess } from './baseline';
import { loadProcess } from './load-process';
import type { AudiencePhaseResult } from './audience';
import type { AutomationsPhaseResult } from './automations';
import type { BroadcastPhaseResult } from './broadcast';
import type { CapsPhaseResult } from './caps';
import type { ConsolePhaseResult } from './console';
import type { DirectPhaseResult } from './direct';
import type { DrainPhaseResult } from './drain';
import type { RelayResult } from './relay';
import type { SendsResult } from './sends';
import type { SoakResult } from './soak';
import type { TemporalBenchResult } from './temporal';
import type { WebhookBenchResult } from './webhooks';

/** BENCH_SECONDS: each load phase's length, after a discarded warm-up of the same length. */
export const SECONDS = Number(process.env.BENCH_SECONDS || 15);
/** BENCH_CONCURRENCY: requests at once of single-request loads (the baseline, POST /emails, /contacts, /events). */
export const SINGLE_CONCURRENCY = Number(process.env.BENCH_CONCURRENCY || 32);
/** Database pool size of the baseline and of every service. */
export const POOL = 10;

/** The plain message: what the baseline stores, and what the sends and the relay send. */
export const MESSAGE = {
  from: 'Bench <bench@bench.test>',
  to: 'someone@example.com',
  subject: 'Benchmark',
  text: 'hello',
  html: '<p>hello</p>',
};

/** One load run (bench/load.ts, bench/smtp-load.ts): requests/s and latency in ms. */
export interface LoadResult {
  requests: number;
  errors: number;
  firstError: string;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  /** CPU seconds the load generator itself used while its clients ran (bench/load.ts, bench/smtp-load.ts). */
  clientCpuSeconds?: number;
}

/**
 * `body` posted to `url` at `concurrency` for `seconds`, keys (`tokens`) used in turn, from a process
 * of its own (bench/load.ts); `onStart` is called when its clients start.
 */
export function load(
  url: string,
  tokens: string[],
  body: unknown,
  concurrency: number,
  seconds = SECONDS,
  onStart?: () => void,
): Promise<LoadResult> {
  return loadProcess<LoadResult>('load.ts', { url, tokens, body: JSON.stringify(body), concurrency, seconds }, onStart);
}

/** The SMTP relay's load: `connections` SMTP connections, one key each (bench/smtp-load.ts). */
export function smtpLoad(
  port: number,
  tokens: string[],
  message: unknown,
  connections: number,
  seconds = SECONDS,
  onStart?: () => void,
): Promise<LoadResult> {
  return loadProcess<LoadResult>('smtp-load.ts', { port, tokens, message, connections, seconds }, onStart);
}

/** How a phase's service differs from the default one (bench/service.ts). */
export interface ServiceOptions {
  clock?: Clock;
  /** The SMTP server live mail goes to (default: the run's counting relay). */
  smtpPort?: number;
  sendRatePerSecond?: number;
  engineRetentionHours?: number;
  config?: Partial<Config>;
}

/** The service on a fresh database of its own, dropped when the service stops (bench/service.ts). */
export type StartService = (database: string, opts?: ServiceOptions) => Promise<Service>;

/** The run's shared things, started by bench/run.ts before any phase. */
export interface BenchContext {
  log: Logger;
  /** The services' DATA_DIR (the Temporal workers read the API's secrets key from it). */
  dataDir: string;
  /** The run's first baseline: a bare Koa route and one INSERT (bench/baseline.ts). */
  base: LoadResult;
  startService: StartService;
  /** The baseline measured again, on a fresh database named `database`. */
  measureBaseline: (database: string) => Promise<LoadResult>;
  /** The baseline app in a process of its own on a fresh database named `database`, for rounds in turn with a phase (bench/rounds.ts). */
  spawnBaseline: (database: string) => Promise<BaselineProcess>;
  /** CPU seconds so far of PostgreSQL's processes (null when they cannot be read). */
  postgresCpu: () => number | null;
}

/** What each phase's run returns, by the phase's name. */
export interface PhaseResults {
  sends: SendsResult;
  audience: AudiencePhaseResult;
  webhooks: WebhookBenchResult;
  relay: RelayResult;
  caps: CapsPhaseResult;
  drain: DrainPhaseResult;
  direct: DirectPhaseResult;
  temporal: TemporalBenchResult;
  soak: SoakResult;
  broadcast: BroadcastPhaseResult;
  automations: AutomationsPhaseResult;
  console: ConsolePhaseResult;
}
export type PhaseName = keyof PhaseResults;

/** What the run has measured so far: the baseline and each phase run. A section may show another phase's results (the first table does). */
export type Measured = { base: LoadResult } & Partial<PhaseResults>;

/** One phase of `npm run bench`. */
export interface Phase<N extends PhaseName> {
  /** What BENCH_ONLY selects it by. */
  name: N;
  /**
   * Further BENCH_ONLY values, each measuring a part of this phase alone: `run` gets the value,
   * logs what it measured and returns null (there is no section to render from a part).
   */
  parts?: readonly string[];
  /** Measures (the phase's services started and stopped inside) and returns the results. */
  run(ctx: BenchContext, part?: string): Promise<PhaseResults[N] | null>;
  /** Its part of BENCHMARKS.md: a block of lines ending in one newline, or '' if it has none of its own. */
  section(r: PhaseResults[N], measured: Measured): string;
}

/** Numbers as BENCHMARKS.md writes them: fixed decimals, or whole numbers with thousands separators. */
export const f = (x: number, d = 1) => x.toFixed(d);
export const n = (x: number) => x.toLocaleString('en-US');

/** A row of the first table: requests/s, accepted messages/s ('–' where a request accepts none), latency, counts. */
export function loadRow(name: string, r: LoadResult, msgs: number | null): string {
  return `| ${name} | ${f(r.rps)} | ${msgs === null ? '–' : f(msgs)} | ${f(r.p50)} | ${f(r.p99)} | ${r.requests} | ${r.errors} |`;
}
