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
 *
 * This file: the phase and its section. The measurements: bench/temporal-engines.ts; the automation
 * runs: bench/temporal-runs.ts; the dev server and workers: bench/temporal-processes.ts; the CPU:
 * bench/temporal-cpu.ts.
 */
import os from 'node:os';
import { readConfig } from '../server/config';
import { DRAIN_MESSAGES } from './drain';
import { SINGLE_CONCURRENCY, type Phase } from './phase';
import type { CpuUse } from './temporal-cpu';
import { benchTemporal, type TemporalBenchResult } from './temporal-engines';
import { RUNS, RUNS_WARMUP } from './temporal-runs';

export type { CpuUse } from './temporal-cpu';
export type { EngineDrain, EngineFigures, StartBenchService, TemporalBenchResult } from './temporal-engines';
export type { RunsResult } from './temporal-runs';

/** The issue's goals: the live drain against the same run's ceiling, and test mode in messages a second. */
export const TEMPORAL_GOALS = { liveOfCeiling: 0.5, testPerSecond: 500 };
/** Issue 52's, on the cluster: the live drain against the ceiling, automation runs against the embedded engine's. */
export const CLUSTER_GOALS = { liveOfCeiling: 0.7, runsOfEmbedded: 0.5 };

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
  const c = r.cluster;
  const total = (c: CpuUse) => c.bench + (c.postgres ?? 0) + c.server + c.workers;
  const perThousand = (c: CpuUse) => (total(c) / r.messages) * 1000;
  const parts = (c: CpuUse) =>
    Object.entries(c.serverParts)
      .sort((a, b) => b[1] - a[1])
      .map(([name, s]) => `${name} ${f((s / (c.wallSeconds * cores)) * 100, 0)}%`)
      .join(', ');
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

| Measure | Embedded engine | Temporal dev server | Temporal cluster | Goal (issues 35, 52) |
|---|---|---|---|---|
| Ceiling, mean of before and after | ${f(r.ceilingPerSecond, 0)} messages/s (${f(r.ceilingBefore, 0)} before, ${f(r.ceilingAfter, 0)} after) | | | |
| Live drain | ${f(e.drain.livePerSecond, 1)} messages/s (${f(e.drain.liveSeconds)} s), ${pct(e.drain.livePerSecond)} of the ceiling | **${f(t.drain.livePerSecond, 1)} messages/s** (${f(t.drain.liveSeconds)} s; accepted after ${f(t.drain.liveAcceptSeconds)} s), **${pct(t.drain.livePerSecond)}** of the ceiling | ${c ? `**${f(c.drain.livePerSecond, 1)} messages/s** (${f(c.drain.liveSeconds)} s), **${pct(c.drain.livePerSecond)}** of the ceiling` : '–'} | dev ≥ ${f(TEMPORAL_GOALS.liveOfCeiling * 100, 0)}%, cluster ≥ ${f(CLUSTER_GOALS.liveOfCeiling * 100, 0)}% of the ceiling |
| Test-mode drain | ${f(e.drain.testPerSecond, 1)} messages/s | **${f(t.drain.testPerSecond, 1)} messages/s** (${f(t.drain.testSeconds)} s) | ${c ? `**${f(c.drain.testPerSecond, 1)} messages/s** (${f(c.drain.testSeconds)} s)` : '–'} | ≥ ${TEMPORAL_GOALS.testPerSecond}/s |
| Live drain of a backlog seeded in SQL (no acceptance meanwhile) | ${f(e.drain.seededPerSecond, 1)} messages/s, ${pct(e.drain.seededPerSecond)} | ${f(t.drain.seededPerSecond, 1)} messages/s, ${pct(t.drain.seededPerSecond)} | ${c ? `${f(c.drain.seededPerSecond, 1)} messages/s, ${pct(c.drain.seededPerSecond)}` : '–'} | |
| Automation runs completed per second (\`[update_contact]\`) | ${f(e.runs.perSecond, 0)} (${n(e.runs.completed)} in ${f(e.runs.seconds)} s; created over ${f(e.runs.postSeconds)} s) | **${f(t.runs.perSecond, 0)}** (${n(t.runs.completed)} in ${f(t.runs.seconds)} s; created over ${f(t.runs.postSeconds)} s) | ${c ? `**${f(c.runs.perSecond, 0)}** (${n(c.runs.completed)} in ${f(c.runs.seconds)} s), ${f((c.runs.perSecond / e.runs.perSecond) * 100, 0)}% of the embedded engine's` : '–'} | cluster ≥ ${f(CLUSTER_GOALS.runsOfEmbedded * 100, 0)}% of the embedded engine's |
| CPU during the live drain: this process / PostgreSQL / Temporal server / workers | ${cpuCell(e.drain.cpu.live, false)} | ${cpuCell(t.drain.cpu.live, true)} | ${c ? cpuCell(c.drain.cpu.live, true) : '–'} | |
| CPU during the test-mode drain | ${cpuCell(e.drain.cpu.test, false)} | ${cpuCell(t.drain.cpu.test, true)} | ${c ? cpuCell(c.drain.cpu.test, true) : '–'} | |
| CPU during the seeded live drain | ${cpuCell(e.drain.cpu.seeded, false)} | ${cpuCell(t.drain.cpu.seeded, true)} | ${c ? cpuCell(c.drain.cpu.seeded, true) : '–'} | |
| CPU during the automation runs (the events' poster not counted) | ${cpuCell(e.runs.cpu, false)} | ${cpuCell(t.runs.cpu, true)} | ${c ? cpuCell(c.runs.cpu, true) : '–'} | |

- Temporal's live drain is **${pct(t.drain.livePerSecond)}** of the ceiling (goal ≥ ${f(TEMPORAL_GOALS.liveOfCeiling * 100, 0)}%) and ${f((t.drain.livePerSecond / e.drain.livePerSecond) * 100, 0)}% of the embedded engine's; test mode **${f(t.drain.testPerSecond, 0)}**/s (goal ≥ ${TEMPORAL_GOALS.testPerSecond}).
- CPU seconds of the counted processes per 1,000 live messages drained: ${f(perThousand(e.drain.cpu.live), 2)} on the embedded engine, ${f(perThousand(t.drain.cpu.live), 2)} on Temporal (of them the Temporal server ${f((t.drain.cpu.live.server / r.messages) * 1000, 2)}, the workers ${f((t.drain.cpu.live.workers / r.messages) * 1000, 2)}); per automation run ${f((total(e.runs.cpu) / e.runs.completed) * 1000, 0)} ms and ${f((total(t.runs.cpu) / t.runs.completed) * 1000, 0)} ms (the Temporal server ${f((t.runs.cpu.server / t.runs.completed) * 1000, 0)} ms).
- Dev server up, API connected and ${r.workers === 1 ? 'the worker' : 'every worker'} polling (its workflow bundle built) after ${f(r.startSeconds)} s.
${
  c
    ? `- The cluster (\`svc temporal cluster\`: frontend, history, matching and worker services, each a process, on a PostgreSQL of its own; its "Temporal server" CPU is the four services and that PostgreSQL): live drain **${pct(c.drain.livePerSecond)}** of the ceiling (goal ≥ ${f(CLUSTER_GOALS.liveOfCeiling * 100, 0)}%: ${c.drain.livePerSecond >= CLUSTER_GOALS.liveOfCeiling * r.ceilingPerSecond ? 'met' : 'missed'}), automation runs **${f((c.runs.perSecond / e.runs.perSecond) * 100, 0)}%** of the embedded engine's (goal ≥ ${f(CLUSTER_GOALS.runsOfEmbedded * 100, 0)}%: ${c.runs.perSecond >= CLUSTER_GOALS.runsOfEmbedded * e.runs.perSecond ? 'met' : 'missed'}); ${f(perThousand(c.drain.cpu.live), 2)} CPU-seconds per 1,000 live messages (the cluster ${f((c.drain.cpu.live.server / r.messages) * 1000, 2)}), ${f((total(c.runs.cpu) / c.runs.completed) * 1000, 0)} ms per automation run (the cluster ${f((c.runs.cpu.server / c.runs.completed) * 1000, 0)} ms); up and polled after ${f(c.startSeconds)} s (PostgreSQL initialised, schemas applied). The cluster's CPU by process, live drain: ${parts(c.drain.cpu.live)}; automation runs: ${parts(c.runs.cpu)}. Where the time goes: docs/performance.md.`
    : '- The cluster was not measured: its server is not built (`npm run tools`, which needs Go).'
}
`;
}

/** The Temporal phase of `npm run bench` (BENCH_ONLY=temporal): the drains and automation runs on both engines. */
export const temporalPhase: Phase<'temporal'> = {
  name: 'temporal',
  run: ({ log, startService, dataDir }) =>
    benchTemporal({ log, startService, dataDir, messages: DRAIN_MESSAGES, concurrency: SINGLE_CONCURRENCY }),
  section: (r) => temporalSection(r),
};
