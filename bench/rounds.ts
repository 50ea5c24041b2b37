/**
 * Loads measured in alternating rounds, each with the CPU it cost per accepted message.
 *
 * On this machine (two cores, shared with other work) a rate drifts by a third between phases
 * minutes apart, so a row and the yardstick it is compared with are measured in turn on the same
 * services: every round runs each side once, each round one side later (A B, B A, … or A B C D,
 * B C D A, …), after one discarded warm-up each. A ratio is taken per round (the sides of one
 * round ran seconds apart) and the median of the rounds is what a goal is judged on.
 *
 * CPU per accepted message: user + system seconds of the process serving the side (the service:
 * this process, process.cpuUsage; the baseline: its own process, /proc) and of PostgreSQL's
 * processes (the postmaster's tree, /proc, exited backends included), from the moment the load's
 * clients start to the moment they stop, divided by the messages that load got accepted. It
 * counts work, not waiting, so other processes on the machine change it far less than a rate.
 */
import type { Logger } from 'pino';
import { readStat, procTable, treeSeconds } from './proc-cpu';
import { f, SECONDS, type LoadResult } from './phase';

/** BENCH_ROUNDS: rounds of each comparison of a row with its yardstick. */
export const ROUNDS = Number(process.env.BENCH_ROUNDS || 6);
/** Each load of a round: six rounds of two sides measure each side twice as long as one ordinary phase. */
export const ROUND_SECONDS = SECONDS / 3;

/** One side of a comparison. */
export interface Side {
  name: string;
  /** Messages one successful request accepts. */
  perRequest: number;
  /** Runs the load for `seconds`; calls `onStart` when its clients start. */
  load(seconds: number, onStart: () => void): Promise<LoadResult>;
  /** CPU seconds so far of the process that serves this side. */
  cpu(): number;
}

/** One load of one round: its results, the messages it got accepted and the CPU they cost. */
export interface Round extends LoadResult {
  messages: number;
  /** CPU seconds, the serving process's and PostgreSQL's. */
  cpuSeconds: number;
  /** Of which PostgreSQL's (null when its processes cannot be read: DATABASE_URL on another machine). */
  pgSeconds: number | null;
}

/** CPU seconds so far of this process (the service, and whatever else runs in the bench's process). */
export const ownCpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

/** CPU seconds so far of another process (the baseline's); 0 once it is gone or off Linux. */
export const processCpu = (pid: number) => () => readStat(pid)?.seconds ?? 0;

/** CPU seconds so far of PostgreSQL's processes: the postmaster `pid` and its descendants (null for no pid). */
export function postgresCpu(pid: number | null): () => number | null {
  return () => {
    if (pid === null) return null;
    const table = procTable();
    return table ? treeSeconds(table, pid) : null;
  };
}

/** One load of `side`, with the CPU it cost. */
async function measure(side: Side, seconds: number, pg: () => number | null): Promise<Round> {
  let start: { own: number; pg: number | null } | null = null;
  const r = await side.load(seconds, () => (start = { own: side.cpu(), pg: pg() }));
  const s = start as { own: number; pg: number | null } | null;
  if (!s) throw new Error(`${side.name}: the load never said it started`);
  const pgEnd = pg();
  const pgSeconds = s.pg === null || pgEnd === null ? null : pgEnd - s.pg;
  return { ...r, messages: r.requests * side.perRequest, cpuSeconds: side.cpu() - s.own + (pgSeconds ?? 0), pgSeconds };
}

/**
 * Measures `sides` in alternating rounds (see the top of this file): one discarded warm-up each,
 * then `rounds` rounds of `seconds` a load. Answers each side's rounds, in round order.
 */
export async function inTurn(
  log: Logger,
  label: string,
  sides: Side[],
  pg: () => number | null,
  rounds: number,
  seconds: number,
): Promise<Round[][]> {
  for (const side of sides) await side.load(seconds, () => undefined);
  const out: Round[][] = sides.map(() => []);
  for (let round = 0; round < rounds; round++) {
    log.info({ round: round + 1, of: rounds, sides: sides.map((s) => s.name) }, `${label}, in turn`);
    for (let k = 0; k < sides.length; k++) {
      const i = (round + k) % sides.length;
      out[i].push(await measure(sides[i], seconds, pg));
    }
  }
  return out;
}

/** One load measured once (no yardstick beside it), as one round. */
export async function once(side: Side, pg: () => number | null, seconds: number): Promise<Round[]> {
  await side.load(seconds, () => undefined);
  return [await measure(side, seconds, pg)];
}

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** Accepted messages per second of a round. */
export const rate = (r: Round) => r.messages / r.seconds;
/** CPU milliseconds per accepted message of a round (all, or PostgreSQL's). */
export const cpuMs = (r: Round) => (r.messages ? (r.cpuSeconds * 1000) / r.messages : NaN);
export const pgMs = (r: Round) => (r.messages && r.pgSeconds !== null ? (r.pgSeconds * 1000) / r.messages : NaN);

/** The rounds' requests, errors and seconds summed, requests/s over them, the median p50 and p99. */
export function total(rounds: Round[]): LoadResult {
  const requests = rounds.reduce((s, r) => s + r.requests, 0);
  const seconds = rounds.reduce((s, r) => s + r.seconds, 0);
  return {
    requests,
    errors: rounds.reduce((s, r) => s + r.errors, 0),
    firstError: rounds.find((r) => r.firstError)?.firstError ?? '',
    seconds,
    rps: requests / seconds,
    p50: median(rounds.map((r) => r.p50)),
    p99: median(rounds.map((r) => r.p99)),
  };
}

/** The median of `xs` with the range of the rounds, as BENCHMARKS.md writes it: `1234.5 (1100.0–1300.2)`, `71% (65–78%)`. */
export function spread(xs: number[], d = 1, scale = 1, unit = ''): string {
  if (xs.length === 0 || xs.some((x) => Number.isNaN(x))) return '–';
  const v = xs.map((x) => x * scale);
  const w = (x: number) => f(x, d) + unit;
  return v.length === 1 ? w(v[0]) : `${w(median(v))} (${f(Math.min(...v), d)}–${w(Math.max(...v))})`;
}

/** Per round: `row`'s accepted messages per second over `base`'s. */
export const rateRatios = (row: Round[], base: Round[]) => row.map((r, i) => rate(r) / rate(base[i]));
/** Per round: `base`'s CPU per message over `row`'s (the share of the yardstick's efficiency the row reaches). */
export const cpuRatios = (row: Round[], base: Round[]) => row.map((r, i) => cpuMs(base[i]) / cpuMs(r));

/** A row of the first table: rounds, messages/s and CPU per message with their spread, latency, counts. */
export function roundsRow(name: string, rounds: Round[]): string {
  const t = total(rounds);
  return `| ${name} | ${rounds.length} | ${spread(rounds.map(rate))} | ${spread(rounds.map(cpuMs), 3)} | ${spread(rounds.map(pgMs), 3)} | ${f(t.p50)} | ${f(t.p99)} | ${t.requests} | ${t.errors} |`;
}

export const ROUNDS_HEADER = `| Scenario | Rounds | Accepted messages/s, median (range) | CPU ms per message, median (range) | of which PostgreSQL | p50 ms | p99 ms | Requests | Errors |
|---|---|---|---|---|---|---|---|---|`;

/** A goal's row: the median of the rounds' ratios (and their range), the CPU ratio beside it, met or missed. */
export function goalRow(name: string, row: Round[], base: Round[], goal: number): string {
  const ratios = rateRatios(row, base);
  const met = median(ratios) >= goal;
  return `| ${name} | ${spread(ratios, 0, 100, '%')} | ${spread(cpuRatios(row, base), 0, 100, '%')} | ≥ ${f(goal * 100, 0)}% | ${met ? 'met' : '**missed**'} |`;
}

export const GOALS_HEADER = `| Goal: same-run ratio, median of the rounds (range) | Messages/s | CPU per message (inverse) | Goal | |
|---|---|---|---|---|`;
