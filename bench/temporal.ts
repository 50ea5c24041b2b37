/**
 * The Temporal phase of `npm run bench` (issue 35; BENCH_ONLY=temporal): the drains of bench/drain.ts
 * and automation runs completed per second, on the embedded engine and on Temporal one after the
 * other, against one counting SMTP sink and one ceiling measured before and after both.
 *
 * Temporal: the project's dev server (`npm run tools` builds it in .tools/bin; devServerArgs) on
 * free loopback ports with its SQLite in a temporary folder, the API in this process with
 * ENGINE=temporal and CONFIRMATION_WINDOW_HOURS=0 (the outbox starts SendBatch runs), and
 * BENCH_TEMPORAL_WORKERS `svc worker` processes. SEND_RATE_PER_SECOND is lifted on both sides:
 * the outbox's rate in SQL and the delivery task queue's `maxTaskQueueActivitiesPerSecond`.
 * Without the Temporal CLI the phase says so and is skipped.
 *
 * CPU seconds of each process (from /proc, Linux) are taken at each measured drain's start and end,
 * so the result says where the machine's cores went.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { Connection } from '@temporalio/client';
import { temporal as proto } from '@temporalio/proto';
import { readConfig, type Config } from '../server/config';
import type { Service } from '../server/service';
import { temporalToolPath } from '../tools/temporal-tools';
import { DevServer } from '../tools/dev-server';
import { benchDrain, smtpCeiling, type DrainResult } from './drain';
import { countingSink } from './sink';
import { automationsOrg, createAutomation, postEvents } from './automations';

const ROOT = path.resolve(__dirname, '..');

/** The goals: the live drain against the same run's ceiling, and test mode in messages a second. */
export const TEMPORAL_GOALS = { liveOfCeiling: 0.5, testPerSecond: 500 };

/** `svc worker` processes, and WORKER_CONCURRENCY for each (default: the configuration's). */
const WORKERS = Number(process.env.BENCH_TEMPORAL_WORKERS || 1);
const WORKER_CONCURRENCY = Number(process.env.BENCH_TEMPORAL_CONCURRENCY || readConfig({}).workerConcurrency);
/** Automation runs measured per engine (after a discarded warm-up of RUNS_WARMUP). */
const RUNS = Number(process.env.BENCH_TEMPORAL_RUNS || 2000);
const RUNS_WARMUP = 200;
/**
 * Where the dev server keeps its state: `file` (default), a SQLite file in a temporary folder, as
 * `svc temporal dev` and the tests run it; `memory`, SQLite in memory (what start-dev does without
 * --db-filename), to see what the file costs.
 */
const SERVER_DB = process.env.BENCH_TEMPORAL_DB === 'memory' ? 'memory' : 'file';
/** The send rate both engines run with: lifted, so the drain measures delivery, not the limit. */
const LIFTED_RATE = 100_000;

/** Seconds of CPU (user + system) each part of the machine used during one measured drain. */
export interface CpuUse {
  wallSeconds: number;
  /** This process: the API, its outbox, the counting sink (and, on the embedded engine, the engine and its SMTP client thread). */
  bench: number;
  /** The embedded PostgreSQL's processes (null with DATABASE_URL). */
  postgres: number | null;
  /** The Temporal dev server and the `svc worker` processes (0 on the embedded engine). */
  server: number;
  workers: number;
}

/** Runs of `[update_contact]` started by POST /events, from the first run's creation to the last one's finish. */
export interface RunsResult {
  runs: number;
  completed: number;
  /** First run created → last run finished (database times). */
  seconds: number;
  perSecond: number;
  /** First run created → last run created: how fast POST /events let them in. */
  postSeconds: number;
  postErrors: number;
  /** From the measured events' first post until the last run finished. */
  cpu: CpuUse;
}

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
    };

export type StartBenchService = (
  database: string,
  opts: { smtpPort: number; sendRatePerSecond: number; config?: Partial<Config> },
) => Promise<Service>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

    log.info({ workers: WORKERS, workerConcurrency: WORKER_CONCURRENCY }, 'temporal: dev server, API with ENGINE=temporal, svc worker');
    const t0 = performance.now();
    const server = await startDevServer();
    const stops: (() => Promise<unknown>)[] = [() => server.stop()];
    let temporal: EngineFigures;
    let startSeconds: number;
    try {
      const taskQueue = `bench-${Date.now()}`;
      const env = { ENGINE: 'temporal', TEMPORAL_ADDRESS: server.address, TEMPORAL_TASK_QUEUE: taskQueue, CONFIRMATION_WINDOW_HOURS: '0' };
      const service = await opts.startService('bench_service_engine_temporal', {
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
      startSeconds = (performance.now() - t0) / 1000;
      log.info({ startSeconds }, 'temporal: workers polling');
      cpu.temporal = { server: server.pid!, workers: workers.map((w) => w.pid) };
      temporal = await measure(service, sink, cpu, opts);
    } catch (err) {
      log.error({ server: server.output().slice(-2000) }, 'temporal: the dev server said');
      throw err;
    } finally {
      for (const stop of stops.reverse()) await stop().catch((err) => log.warn({ err }, 'temporal: stopping'));
    }

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
      temporal,
      startSeconds,
    };
  } finally {
    await sink.close();
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

/**
 * Automation runs per second: an automation whose only step is update_contact (so each run starts
 * on the engine, takes a step and finishes), RUNS events posted from a separate process at
 * `concurrency`, a new contact each, after RUNS_WARMUP discarded; timed in the database from the
 * first measured run's created_at to the last one's finished_at.
 */
async function benchRuns(service: Service, log: Logger, concurrency: number, cpu: CpuMeter): Promise<RunsResult> {
  const org = await automationsOrg(service, 'Bench runs', concurrency);
  const automationId = await createAutomation(org, 'Bench run through', 'run_through', [
    { type: 'update_contact', properties: { welcomed: true } },
  ]);
  const sql = service.db.orm.em.fork().getConnection();
  const stats = async (prefix: string) => {
    const [row] = await sql.execute<{ runs: number; completed: number; seconds: number | null; post_seconds: number | null }[]>(
      `select count(*)::int as runs,
              (count(*) filter (where status = 'completed'))::int as completed,
              extract(epoch from max(finished_at) - min(created_at))::float8 as seconds,
              extract(epoch from max(created_at) - min(created_at))::float8 as post_seconds
         from automation_runs where automation_id = ? and email like ?`,
      [automationId, `${prefix}-%`],
    );
    return row;
  };
  const post = async (prefix: string, events: number) => {
    const r = await postEvents({ url: service.url, tokens: org.tokens, name: 'run_through', prefix, events, concurrency });
    if (r.errors) log.warn({ errors: r.errors, firstError: r.firstError }, 'temporal: events refused');
    const deadline = Date.now() + 10 * 60_000;
    for (;;) {
      const s = await stats(prefix);
      if (s.runs >= r.posted && s.completed >= s.runs) return { ...s, postErrors: r.errors };
      if (Date.now() > deadline) {
        log.warn(s, 'temporal: automation runs not all completed in 10 minutes');
        return { ...s, postErrors: r.errors };
      }
      await sleep(100);
    }
  };
  log.info(
    { runs: RUNS, warmup: RUNS_WARMUP, engine: service.engine.name },
    'temporal: automation runs (update_contact), warm-up then measured',
  );
  await post('warm', RUNS_WARMUP);
  const before = cpu.snapshot();
  const s = await post('run', RUNS);
  const used = cpu.since(before);
  const seconds = Number(s.seconds ?? NaN);
  return {
    runs: s.runs,
    completed: s.completed,
    seconds,
    perSecond: s.completed / seconds,
    postSeconds: Number(s.post_seconds ?? NaN),
    postErrors: s.postErrors,
    cpu: used,
  };
}

/** `temporal server start-dev` as the tests start it: free loopback ports, SQLite in a temporary folder (or memory). */
export const startDevServer = (): Promise<DevServer> => DevServer.start({ inMemory: SERVER_DB === 'memory' });

interface WorkerProcess {
  pid: number;
  exited: () => boolean;
  output(): string;
  stop(): Promise<void>;
}

/** `svc worker` (bin/svc.js) in its own process, as an operator runs it. */
export function startWorker(env: Record<string, string>): WorkerProcess {
  const proc = spawn(process.execPath, [path.join(ROOT, 'bin/svc.js'), 'worker'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.tmpdir(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (c: Buffer) => (out = (out + c).slice(-20_000));
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  return {
    pid: proc.pid!,
    exited: () => proc.exitCode !== null || proc.signalCode !== null,
    output: () => out,
    // SIGTERM: svc worker finishes its activities and closes its connections.
    stop: () => stopProcess(proc, 30_000),
  };
}

/** Waits until every worker polls the main task queue for workflow tasks and the delivery task queue for activities. */
async function waitForPollers(address: string, taskQueue: string, workers: WorkerProcess[]): Promise<void> {
  const connection = await Connection.connect({ address });
  const { TaskQueueType } = proto.api.enums.v1;
  const pollers = async (name: string, type: proto.api.enums.v1.TaskQueueType) =>
    (await connection.workflowService.describeTaskQueue({ namespace: 'default', taskQueue: { name }, taskQueueType: type })).pollers
      ?.length ?? 0;
  try {
    const deadline = Date.now() + 180_000;
    for (;;) {
      const dead = workers.find((w) => w.exited());
      if (dead) throw new Error(`svc worker exited:\n${dead.output()}`);
      const main = await pollers(taskQueue, TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW);
      const delivery = await pollers(`${taskQueue}-delivery`, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY);
      if (main >= workers.length && delivery >= workers.length) return;
      if (Date.now() > deadline) throw new Error(`svc worker not polling after 180 s:\n${workers.map((w) => w.output()).join('\n')}`);
      await sleep(250);
    }
  } finally {
    await connection.close();
  }
}

async function stopProcess(proc: ChildProcess, graceMs: number): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

interface CpuSnapshot {
  at: number;
  bench: number;
  postgres: number | null;
  server: number;
  workers: number;
}

/** CPU seconds of the processes the phase runs on, read from /proc (Linux; elsewhere only this process's). */
class CpuMeter {
  /** Set once the Temporal processes run. */
  temporal: { server: number; workers: number[] } | null = null;

  constructor(private readonly dataDir: string) {}

  snapshot(): CpuSnapshot {
    const u = process.cpuUsage();
    const table = procTable();
    const tree = (pid: number | null) => (pid === null || !table ? 0 : treeSeconds(table, pid));
    const pg = this.postmaster();
    return {
      at: performance.now(),
      bench: (u.user + u.system) / 1e6,
      postgres: pg === null || !table ? null : tree(pg),
      server: this.temporal ? tree(this.temporal.server) : 0,
      workers: this.temporal ? this.temporal.workers.reduce((s, pid) => s + tree(pid), 0) : 0,
    };
  }

  since(a: CpuSnapshot): CpuUse {
    const b = this.snapshot();
    return {
      wallSeconds: (b.at - a.at) / 1000,
      bench: b.bench - a.bench,
      postgres: a.postgres === null || b.postgres === null ? null : b.postgres - a.postgres,
      server: b.server - a.server,
      workers: b.workers - a.workers,
    };
  }

  private postmaster(): number | null {
    try {
      return Number(fs.readFileSync(path.join(this.dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]) || null;
    } catch {
      return null;
    }
  }
}

/** Linux's clock ticks a second (sysconf(_SC_CLK_TCK)), 100 on every platform Node runs Linux on. */
const TICKS = 100;

interface ProcRow {
  ppid: number;
  /** utime + stime + cutime + cstime (exited children it waited for included), seconds. */
  seconds: number;
}

function procTable(): Map<number, ProcRow> | null {
  if (process.platform !== 'linux') return null;
  const table = new Map<number, ProcRow>();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // After "pid (comm) ": state ppid ... utime(14) stime(15) cutime(16) cstime(17), numbered from pid = 1.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    table.set(Number(name), { ppid: Number(f[1]), seconds: ticks / TICKS });
  }
  return table;
}

/** A process's CPU with its descendants'. */
function treeSeconds(table: Map<number, ProcRow>, root: number): number {
  let total = 0;
  const children = new Map<number, number[]>();
  for (const [pid, row] of table) children.set(row.ppid, [...(children.get(row.ppid) ?? []), pid]);
  const stack = [root];
  while (stack.length) {
    const pid = stack.pop()!;
    total += table.get(pid)?.seconds ?? 0;
    stack.push(...(children.get(pid) ?? []));
  }
  return total;
}

/** BENCHMARKS.md's "Temporal" section. */
export function temporalSection(r: TemporalBenchResult): string {
  if (r.skipped !== null) return `## Temporal\n\nNot measured: ${r.skipped}.\n`;
  const f = (n: number, d = 1) => n.toFixed(d);
  const n = (x: number) => x.toLocaleString('en-US');
  const pct = (x: number) => `${f((x / r.ceilingPerSecond) * 100, 0)}%`;
  const cores = os.cpus().length;
  const cpuCell = (c: CpuUse, temporal: boolean) => {
    const part = (s: number | null) => (s === null ? '–' : `${f((s / (c.wallSeconds * cores)) * 100, 0)}%`);
    // The embedded engine has no server or worker processes: its engine is in this process.
    return `${part(c.bench)} / ${part(c.postgres)} / ${temporal ? part(c.server) : '–'} / ${temporal ? part(c.workers) : '–'}`;
  };
  const e = r.embedded;
  const t = r.temporal;
  const total = (c: CpuUse) => c.bench + (c.postgres ?? 0) + c.server + c.workers;
  const perThousand = (c: CpuUse) => (total(c) / r.messages) * 1000;
  return `## Temporal

The drains of "Delivery drain" (${n(r.messages)} messages, the same acceptance load and counting sink in this process) and automation runs, measured
on the embedded engine and then on Temporal in one phase, against one ceiling: pooled nodemailer with ${readConfig({}).workerConcurrency} connections to the same sink,
before both engines and after them. Temporal: the project's dev server (\`temporal server start-dev\` built by \`npm run tools\`, ${r.serverDb === 'file' ? 'a SQLite file in WAL mode in a temporary folder' : 'SQLite in memory'},
loopback), the API in this process with \`ENGINE=temporal\` and \`CONFIRMATION_WINDOW_HOURS=0\` (the outbox starts SendBatch runs
of up to 100), and ${r.workers} \`svc worker\` process${r.workers === 1 ? '' : 'es'} (\`WORKER_CONCURRENCY\` ${r.workerConcurrency}: activities at once per task queue); \`SEND_RATE_PER_SECOND\`
lifted on both engines (on Temporal also the delivery task queue's \`maxTaskQueueActivitiesPerSecond\`). Automation runs: an automation whose
only step is \`update_contact\`, ${n(RUNS)} events posted by a separate process at concurrency 32 (a new contact each) after ${RUNS_WARMUP} discarded,
timed in the database from the first run's \`created_at\` to the last one's \`finished_at\`. CPU: each process's share of the machine's ${cores} cores
during the drain (this process: API, outbox and sink, and on the embedded engine the engine and its SMTP client; PostgreSQL; the Temporal
server; the workers); the acceptance load's process is not counted.

| Measure | Embedded engine | Temporal | Goal (issue 35) |
|---|---|---|---|
| Ceiling, mean of before and after | ${f(r.ceilingPerSecond, 0)} messages/s (${f(r.ceilingBefore, 0)} before, ${f(r.ceilingAfter, 0)} after) | | |
| Live drain | ${f(e.drain.livePerSecond, 1)} messages/s (${f(e.drain.liveSeconds)} s), ${pct(e.drain.livePerSecond)} of the ceiling | **${f(t.drain.livePerSecond, 1)} messages/s** (${f(t.drain.liveSeconds)} s; accepted after ${f(t.drain.liveAcceptSeconds)} s), **${pct(t.drain.livePerSecond)}** of the ceiling | ≥ ${f(TEMPORAL_GOALS.liveOfCeiling * 100, 0)}% of the ceiling |
| Test-mode drain | ${f(e.drain.testPerSecond, 1)} messages/s | **${f(t.drain.testPerSecond, 1)} messages/s** (${f(t.drain.testSeconds)} s) | ≥ ${TEMPORAL_GOALS.testPerSecond}/s |
| Live drain of a backlog seeded in SQL (no acceptance meanwhile) | ${f(e.drain.seededPerSecond, 1)} messages/s, ${pct(e.drain.seededPerSecond)} | ${f(t.drain.seededPerSecond, 1)} messages/s, ${pct(t.drain.seededPerSecond)} | |
| Automation runs completed per second (\`[update_contact]\`) | ${f(e.runs.perSecond, 0)} (${n(e.runs.completed)} in ${f(e.runs.seconds)} s; created over ${f(e.runs.postSeconds)} s) | **${f(t.runs.perSecond, 0)}** (${n(t.runs.completed)} in ${f(t.runs.seconds)} s; created over ${f(t.runs.postSeconds)} s) | |
| CPU during the live drain: this process / PostgreSQL / Temporal server / workers | ${cpuCell(e.drain.cpu.live, false)} | ${cpuCell(t.drain.cpu.live, true)} | |
| CPU during the test-mode drain | ${cpuCell(e.drain.cpu.test, false)} | ${cpuCell(t.drain.cpu.test, true)} | |
| CPU during the seeded live drain | ${cpuCell(e.drain.cpu.seeded, false)} | ${cpuCell(t.drain.cpu.seeded, true)} | |
| CPU during the automation runs (the events' poster not counted) | ${cpuCell(e.runs.cpu, false)} | ${cpuCell(t.runs.cpu, true)} | |

- Temporal's live drain is **${pct(t.drain.livePerSecond)}** of the ceiling (goal ≥ ${f(TEMPORAL_GOALS.liveOfCeiling * 100, 0)}%) and ${f((t.drain.livePerSecond / e.drain.livePerSecond) * 100, 0)}% of the embedded engine's; test mode **${f(t.drain.testPerSecond, 0)}**/s (goal ≥ ${TEMPORAL_GOALS.testPerSecond}).
- CPU seconds of the counted processes per 1,000 live messages drained: ${f(perThousand(e.drain.cpu.live), 2)} on the embedded engine, ${f(perThousand(t.drain.cpu.live), 2)} on Temporal (of them the Temporal server ${f((t.drain.cpu.live.server / r.messages) * 1000, 2)}, the workers ${f((t.drain.cpu.live.workers / r.messages) * 1000, 2)}); per automation run ${f((total(e.runs.cpu) / e.runs.completed) * 1000, 0)} ms and ${f((total(t.runs.cpu) / t.runs.completed) * 1000, 0)} ms (the Temporal server ${f((t.runs.cpu.server / t.runs.completed) * 1000, 0)} ms).
- Dev server up, API connected and ${r.workers === 1 ? 'the worker' : 'every worker'} polling (its workflow bundle built) after ${f(r.startSeconds)} s.
`;
}
