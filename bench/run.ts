/**
 * npm run bench: accepted messages per second, CPU per accepted message and latency for POST /emails,
 * POST /emails/batch and the SMTP relay, each measured in alternating rounds with its yardstick in
 * the same run (bench/rounds.ts: a bare Koa route with one PostgreSQL insert, a batch baseline with
 * one insert of 100 rows, or POST /emails for the relay), then the other phases of
 * bench/registry.ts. Writes BENCHMARKS.md. Loopback only; every phase is bounded in time.
 *
 * In order: the database, the baseline, the counting SMTP relay the services send to, then each
 * phase (its services started and stopped inside it), then BENCHMARKS.md: the header and each
 * phase's section.
 *
 * Switches (environment), defaults in brackets:
 * - BENCH_ONLY: for iterating on one path, measures the baseline and the phases named only (comma
 *   separated; in registry order), logs their results and, once all ran, prints their sections
 *   (`sends,relay` prints the first table with the relay's rows); BENCHMARKS.md is not written.
 *   Phases: sends, audience, webhooks, relay, caps, drain, direct, temporal, soak, broadcast,
 *   automations, console; parts of sends: live-single, test-single, live-batch, test-batch, template
 *   (live single sends plain and with templates).
 * - DATABASE_URL: a PostgreSQL to use (its admin URL; the bench creates and drops its databases)
 *   instead of an embedded one.
 * - BENCH_SECONDS [15]: each load phase's length, after a discarded warm-up of the same length.
 * - BENCH_ROUNDS [6]: rounds of each accept row measured in turn with its yardstick (bench/rounds.ts),
 *   each load a third of BENCH_SECONDS.
 * - BENCH_CONCURRENCY [32]: requests at once of single-request loads (baseline, /emails, /contacts, /events).
 * - BENCH_BATCH_CONCURRENCY [4]: POST /emails/batch requests at once (sends).
 * - BENCH_WEBHOOK_DELIVERIES [10000], BENCH_WEBHOOK_RATE [100]: the webhooks' burst, and the steady
 *   event rate (per second) of their latency measurement.
 * - BENCH_PARKED [100000]: messages parked behind a spent cap and released at a day turn (caps).
 * - BENCH_BULK_BACKLOG [10000], BENCH_PICKUP_SENDS [60]: the bulk backlog transactional pickup is
 *   measured behind, and the transactional sends timed (caps and drain).
 * - BENCH_DRAIN_MESSAGES [5000]: the backlog of each drain (drain and temporal).
 * - BENCH_TEMPORAL_WORKERS [1], BENCH_TEMPORAL_CONCURRENCY [WORKER_CONCURRENCY's default],
 *   BENCH_TEMPORAL_RUNS [2000], BENCH_TEMPORAL_DB [file; or memory]: the Temporal phase (bench/temporal.ts).
 * - BENCH_SOAK_MINUTES [30], BENCH_SOAK_RATE [100]: the soak's length and live messages a second.
 * - BENCH_BROADCAST_CONTACTS [100000]: the broadcast's audience.
 * - BENCH_SLEEPING_RUNS [10000], BENCH_SLEEPING_SECONDS [240]: runs asleep in a delay for the memory
 *   measurement, and its bound from the first event (automations).
 * - BENCH_DELAY_ZERO_EVENTS [200], BENCH_DELAY_ZERO_INTERVAL_MS [50]: the delay-0 automation's
 *   events, one every so many ms (automations).
 * - BENCH_CONSOLE_MESSAGES [1000000]: the messages of the organization whose console pages are
 *   timed, seeded in SQL (a tenth as many in each of two others; console).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { ensureEmbeddedPostgres } from '../db/embedded-postgres';
import { measureBaseline, spawnBaseline } from './baseline';
import { SECONDS, SINGLE_CONCURRENCY, type BenchContext, type Measured, type Phase, type PhaseName } from './phase';
import { allMeasured, PHASES, renderBenchmarks, selectPhases, thisMachine } from './registry';
import { postgresCpu } from './rounds';
import { benchServices, newDb, postmasterOf } from './service';
import { countingSink } from './sink';

const ONLY = process.env.BENCH_ONLY;

/** Runs one phase and keeps its results in `measured`; with BENCH_ONLY, logs them. */
async function runPhase<N extends PhaseName>(phase: Phase<N>, part: string | undefined, ctx: BenchContext, measured: Measured) {
  const r = await phase.run(ctx, part);
  if (r === null) return; // a part of a phase: logged by the phase
  Object.assign(measured, { [phase.name]: r });
  if (ONLY) ctx.log.info({ base: ctx.base.rps, [phase.name]: r }, `BENCH_ONLY: ${phase.name} measured`);
}

/** With BENCH_ONLY, the sections of the phases measured, once every phase ran (the first table shows the relay's rows). */
function printSections(measured: Measured) {
  for (const phase of PHASES) {
    const r = measured[phase.name];
    if (r === undefined) continue;
    const section = (phase as Phase<PhaseName>).section(r as never, measured);
    if (section) process.stdout.write(section + '\n');
  }
}

async function main() {
  const selected = selectPhases(ONLY);
  const log = pino({ level: 'info' }, pino.destination(2));
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
  const pg = process.env.DATABASE_URL ? null : await ensureEmbeddedPostgres(dataDir, log);
  const adminUrl = process.env.DATABASE_URL ?? pg!.url;

  log.info({ seconds: SECONDS, concurrency: SINGLE_CONCURRENCY }, 'phase 1/3: baseline (bare Koa route, one insert)');
  const baselineOn = async (database: string) => measureBaseline(await newDb(adminUrl, database));
  const base = await baselineOn('bench_baseline');
  // The outbound relay: a real SMTP server on loopback that accepts (and only counts) every message.
  const relay = await countingSink();
  const ctx: BenchContext = {
    log,
    dataDir,
    base,
    startService: benchServices(adminUrl, dataDir, relay.port),
    measureBaseline: baselineOn,
    spawnBaseline: async (database) => spawnBaseline(await newDb(adminUrl, database)),
    postgresCpu: postgresCpu(await postmasterOf(adminUrl)),
  };

  const measured: Measured = { base };
  for (const { phase, part } of selected) await runPhase<PhaseName>(phase, part, ctx, measured);
  await relay.close();
  if (pg) await pg.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });

  if (ONLY) return printSections(measured); // BENCHMARKS.md is written by full runs only
  const all = allMeasured(measured);
  if (!all) throw new Error('a phase returned no results: BENCHMARKS.md is not written');
  const md = renderBenchmarks(all, thisMachine(process.env.DATABASE_URL ? 'DATABASE_URL' : 'embedded-postgres 17'));
  fs.writeFileSync(path.join(__dirname, '..', 'BENCHMARKS.md'), md);
  process.stdout.write(md);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
