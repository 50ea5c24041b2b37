/**
 * The Temporal phase's measurements (bench/temporal.ts), benchTemporal: the ceiling, then the drains
 * of bench/drain.ts and the automation runs (bench/temporal-runs.ts) on the embedded engine, then on
 * Temporal (its dev server and `svc worker` processes: bench/temporal-processes.ts), then the ceiling
 * again, each with the CPU of each process (bench/temporal-cpu.ts).
 */
import type { Logger } from 'pino';
import { readConfig, type Config } from '../server/config';
import type { Service } from '../server/service';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { temporalToolPath } from '../tools/temporal-tools';
import { DevServer } from '../tools/dev-server';
import { TemporalCluster, clusterToolsInstalled } from '../tools/temporal-cluster';
import { benchDrain, smtpCeiling, type DrainResult } from './drain';
import { countingSink } from './sink';
import { CpuMeter, type CpuSnapshot, type CpuUse } from './temporal-cpu';
import { SERVER_DB, startDevServer, startWorker, waitForPollers } from './temporal-processes';
import { benchRuns, type RunsResult } from './temporal-runs';

/** `svc worker` processes, and WORKER_CONCURRENCY for each (default: the configuration's). */
const WORKERS = Number(process.env.BENCH_TEMPORAL_WORKERS || 1);
const WORKER_CONCURRENCY = Number(process.env.BENCH_TEMPORAL_CONCURRENCY || readConfig({}).workerConcurrency);
/** The send rate both engines run with: lifted, so the drain measures delivery, not the limit. */
const LIFTED_RATE = 100_000;

export type EngineDrain = Omit<DrainResult, 'ceilingPerSecond' | 'ceilingBefore' | 'ceilingAfter'> & {
  cpu: Record<'live' | 'test' | 'seeded', CpuUse>;
};

export interface EngineFigures {
  drain: EngineDrain;
  runs: RunsResult;
}

export type TemporalBenchResult =
  | { skipped: string }
  | {
      skipped: null;
      messages: number;
      workers: number;
      workerConcurrency: number;
      /** BENCH_TEMPORAL_DB: the dev server's SQLite in a file (WAL, devServerArgs) or in memory. */
      serverDb: 'file' | 'memory';
      /** As bench/drain.ts: a pooled nodemailer client of WORKER_CONCURRENCY connections to the same sink, before and after. */
      ceilingBefore: number;
      ceilingAfter: number;
      ceilingPerSecond: number;
      embedded: EngineFigures;
      temporal: EngineFigures;
      /** Seconds from nothing to workers polling: dev server up, API connected, workers' bundles built. */
      startSeconds: number;
      /** The same on the cluster on PostgreSQL (tools/temporal-cluster.ts); null when it is not built. */
      cluster: (EngineFigures & { startSeconds: number }) | null;
    };

export type StartBenchService = (
  database: string,
  opts: { smtpPort: number; sendRatePerSecond: number; config?: Partial<Config> },
) => Promise<Service>;

export async function benchTemporal(opts: {
  log: Logger;
  startService: StartBenchService;
  /** The bench's DATA_DIR: the workers read the API's secrets key from it, and the embedded PostgreSQL's pid. */
  dataDir: string;
  messages: number;
  concurrency: number;
}): Promise<TemporalBenchResult> {
  const { log, dataDir, messages } = opts;
  const cli = temporalToolPath('temporal');
  if (!cli) {
    const skipped = 'the Temporal CLI is not installed in .tools/bin (run `npm run tools`; it needs Go): the Temporal phase is skipped';
    log.warn(skipped);
    return { skipped };
  }
  const sink = await countingSink();
  const connections = readConfig({}).workerConcurrency;
  try {
    log.info({ messages, connections }, 'temporal: the ceiling (pooled nodemailer to the counting sink)');
    await smtpCeiling(sink.port, messages, connections);
    const ceilingBefore = await smtpCeiling(sink.port, messages, connections);

    log.info('temporal: the embedded engine, for comparison');
    const cpu = new CpuMeter(dataDir);
    const embeddedService = await opts.startService('bench_service_engine_embedded', {
      smtpPort: sink.port,
      sendRatePerSecond: LIFTED_RATE,
    });
    let embedded: EngineFigures;
    try {
      embedded = await measure(embeddedService, sink, cpu, opts);
    } finally {
      await embeddedService.stop();
    }

    const dev = await onTemporal('dev', sink, cpu, opts);
    const cluster = clusterToolsInstalled() ? await onTemporal('cluster', sink, cpu, opts) : null;
    const ceilingAfter = await smtpCeiling(sink.port, messages, connections);
    return {
      skipped: null,
      messages,
      workers: WORKERS,
      workerConcurrency: WORKER_CONCURRENCY,
      serverDb: SERVER_DB,
      ceilingBefore,
      ceilingAfter,
      ceilingPerSecond: (ceilingBefore + ceilingAfter) / 2,
      embedded,
      temporal: dev.figures,
      startSeconds: dev.startSeconds,
      cluster: cluster && { ...cluster.figures, startSeconds: cluster.startSeconds },
    };
  } finally {
    await sink.close();
  }
}

/**
 * The drains and runs on Temporal: `dev`, the dev server (one process, SQLite); `cluster`, the
 * cluster on PostgreSQL as production runs it (four service processes and their PostgreSQL, all
 * counted as the server's CPU). The same API service, `svc worker` processes and sink either way.
 */
async function onTemporal(
  kind: 'dev' | 'cluster',
  sink: Awaited<ReturnType<typeof countingSink>>,
  cpu: CpuMeter,
  opts: Parameters<typeof benchTemporal>[0],
): Promise<{ figures: EngineFigures; startSeconds: number }> {
  const { log, dataDir } = opts;
  log.info({ kind, workers: WORKERS, workerConcurrency: WORKER_CONCURRENCY }, 'temporal: server, API with ENGINE=temporal, svc worker');
  const t0 = performance.now();
  const clusterDir = kind === 'cluster' ? fs.mkdtempSync(path.join(os.tmpdir(), 'bench-temporal-cluster-')) : '';
  const server = kind === 'dev' ? await startDevServer() : await TemporalCluster.start({ dir: clusterDir });
  const stops: (() => Promise<unknown>)[] = [
    async () => {
      await server.stop();
      if (clusterDir) fs.rmSync(clusterDir, { recursive: true, force: true });
    },
  ];
  try {
    const taskQueue = `bench-${kind}-${Date.now()}`;
    const env = { ENGINE: 'temporal', TEMPORAL_ADDRESS: server.address, TEMPORAL_TASK_QUEUE: taskQueue, CONFIRMATION_WINDOW_HOURS: '0' };
    const service = await opts.startService(`bench_service_engine_temporal_${kind}`, {
      smtpPort: sink.port,
      sendRatePerSecond: LIFTED_RATE,
      config: { engine: 'temporal', temporal: readConfig(env).temporal },
    });
    stops.push(() => service.stop());
    const workers = Array.from({ length: WORKERS }, () =>
      startWorker({
        ...env,
        DATABASE_URL: service.db.url,
        SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
        SEND_RATE_PER_SECOND: String(LIFTED_RATE),
        WORKER_CONCURRENCY: String(WORKER_CONCURRENCY),
        DATA_DIR: dataDir,
        LOG_LEVEL: 'warn',
      }),
    );
    stops.push(async () => Promise.all(workers.map((w) => w.stop())));
    await waitForPollers(server.address, taskQueue, workers);
    const startSeconds = (performance.now() - t0) / 1000;
    log.info({ kind, startSeconds }, 'temporal: workers polling');
    const pg = server instanceof TemporalCluster ? server.postgresPid() : undefined;
    const servers: Record<string, number> =
      server instanceof TemporalCluster ? { ...server.pids(), ...(pg ? { postgres: pg } : {}) } : { server: server.pid! };
    cpu.temporal = { servers, workers: workers.map((w) => w.pid) };
    return { figures: await measure(service, sink, cpu, opts), startSeconds };
  } catch (err) {
    if (server instanceof DevServer) log.error({ server: server.output().slice(-2000) }, 'temporal: the dev server said');
    throw err;
  } finally {
    for (const stop of stops.reverse()) await stop().catch((err) => log.warn({ err }, 'temporal: stopping'));
    cpu.temporal = null;
  }
}

/** The drains (bench/drain.ts) with each one's CPU, then the automation runs, on one service. */
async function measure(
  service: Service,
  sink: { count: () => number; reset: () => void },
  cpu: CpuMeter,
  opts: { log: Logger; messages: number; concurrency: number },
): Promise<EngineFigures> {
  const starts = new Map<string, CpuSnapshot>();
  const used: Partial<Record<'live' | 'test' | 'seeded', CpuUse>> = {};
  const drain = await benchDrain(service, sink, opts.log, opts.messages, (what, edge) => {
    if (edge === 'start') starts.set(what, cpu.snapshot());
    else used[what] = cpu.since(starts.get(what)!);
  });
  const runs = await benchRuns(service, opts.log, opts.concurrency, cpu);
  opts.log.info({ engine: service.engine.name, drain, runs }, 'temporal: engine measured');
  return { drain: { ...drain, cpu: used as EngineDrain['cpu'] }, runs };
}
