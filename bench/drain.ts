import nodemailer from 'nodemailer';
import type { Logger } from 'pino';
import type { Service } from '../server/service';
import { createDomain, createKey } from '../core/provisioning';
import { benchOrganization } from './org';
import { benchPickup, BULK_BACKLOG, PICKUP_SENDS, seed, type PickupResult } from './caps';
import { loadProcess } from './load-process';
import { f, n, type BenchContext, type Phase } from './phase';
import { countingSink, type CountingSink } from './sink';
import { readConfig } from '../server/config';

/** How fast a backlog leaves, against what the same sink takes from a plain pooled client. */
export interface DrainResult {
  messages: number;
  /**
   * A pooled nodemailer client (the same number of connections) filling the sink directly: the
   * mean of one measurement before the drains and one after (after a discarded warm-up), so drift
   * in the machine's speed during the phase counts against both sides alike.
   */
  ceilingPerSecond: number;
  ceilingBefore: number;
  ceilingAfter: number;
  liveSeconds: number;
  /** Of it, until the last batch was accepted. */
  liveAcceptSeconds: number;
  livePerSecond: number;
  testSeconds: number;
  testAcceptSeconds: number;
  testPerSecond: number;
  /** Live, the backlog written in SQL before the clock starts: delivery alone, without the API accepting meanwhile. */
  seededSeconds: number;
  seededPerSecond: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The discarded backlog drained before the measured ones. */
const WARMUP = 2000;

/** Keys accepting each backlog at once. */
const ACCEPTING_KEYS = 4;

/** The sink's ceiling: `n` messages through one pooled nodemailer transport of `connections`. */
export async function smtpCeiling(port: number, n: number, connections: number): Promise<number> {
  const transport = nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    secure: false,
    ignoreTLS: true,
    pool: true,
    maxConnections: connections,
  });
  const t0 = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: connections * 2 }, async () => {
      while (next < n) {
        const i = next++;
        await transport.sendMail({
          from: 'bench@bench.test',
          to: `r${i}@example.com`,
          subject: 'Ceiling',
          text: 'hello',
          html: '<p>hello</p>',
        });
      }
    }),
  );
  const seconds = (Date.now() - t0) / 1000;
  transport.close();
  return n / seconds;
}

/**
 * A backlog of `n` messages accepted through the API (batches of 100, as fast as four keys allow),
 * timed from the first acceptance until the last one left: live ones counted at the sink, test
 * ones by their final status. The service runs with SEND_RATE_PER_SECOND lifted.
 */
export async function benchDrain(
  service: Service,
  sink: { count: () => number; reset: () => void },
  log: Logger,
  n: number,
  /** Told when each measured drain begins and ends (bench/temporal.ts samples CPU there). */
  mark: (drain: 'live' | 'test' | 'seeded', edge: 'start' | 'end') => void = () => undefined,
): Promise<Omit<DrainResult, 'ceilingPerSecond' | 'ceilingBefore' | 'ceilingAfter'>> {
  const orm = service.db.orm;
  const org = await benchOrganization(orm, 'Bench drain');
  const domain = await createDomain(orm, org.id, 'drain.bench.test', { verified: true, warmup: false });
  // A key admits 1,000 messages a second (its window's most): four keys each, sending at once, so
  // acceptance is not what the drain measures.
  const keys: Record<'live' | 'test', string[]> = { live: [], test: [] };
  for (const mode of ['live', 'test'] as const) {
    for (let k = 0; k < ACCEPTING_KEYS; k++) {
      keys[mode].push((await createKey(orm, org.id, { name: `${mode}-${k}`, permission: 'send', mode, rateLimit: 1000 })).token);
    }
  }
  // Acceptance load from its own process, as every other phase's load: API clients are not in the service's process.
  const accept = (mode: 'live' | 'test', count = n, prefix: string = mode) =>
    loadProcess<{ startedAt: number; seconds: number }>('accept-load.ts', {
      url: service.url,
      tokens: keys[mode],
      n: count,
      prefix,
      from: 'bench@drain.bench.test',
    });
  const finished = async (mode: string) => {
    const [row] = await orm.em
      .fork()
      .getConnection()
      .execute(`select count(*)::int as n from emails where organization_id = ? and mode = ? and status not in ('queued', 'sending')`, [
        org.id,
        mode,
      ]);
    return Number(row.n);
  };
  const until = async (done: () => Promise<boolean>, what: string) => {
    const deadline = Date.now() + 15 * 60_000;
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`drain: ${what} did not finish in 15 minutes`);
      await sleep(100);
    }
  };

  // A discarded round first, as for the ceiling: the drain is not measured on code the JIT has
  // not optimized yet (the mailer's thread starts cold; the ceiling's client ran in this thread).
  log.info({ messages: WARMUP }, 'drain: warm-up backlog (discarded)');
  sink.reset();
  await accept('live', WARMUP, 'warmup');
  await until(async () => sink.count() >= WARMUP, 'warm-up');

  log.info({ messages: n }, 'drain: live backlog to the counting sink');
  sink.reset();
  mark('live', 'start');
  // From the first batch posted: the load process's own start-up is not the drain's.
  const live = await accept('live');
  const liveAcceptSeconds = live.seconds;
  await until(async () => sink.count() >= n, 'live');
  const liveSeconds = (Date.now() - live.startedAt) / 1000;
  mark('live', 'end');

  log.info({ messages: n }, 'drain: test-mode backlog');
  mark('test', 'start');
  const test = await accept('test');
  const testAcceptSeconds = test.seconds;
  await until(async () => (await finished('test')) >= n, 'test');
  const testSeconds = (Date.now() - test.startedAt) / 1000;
  mark('test', 'end');

  log.info({ messages: n }, 'drain: a live backlog seeded in SQL');
  const seedKey = await createKey(orm, org.id, { name: 'seeded', permission: 'send', mode: 'live', rateLimit: 1000 });
  await seed(service, {
    orgId: org.id,
    keyId: seedKey.key.id,
    domainId: domain.id,
    domain: domain.name,
    stream: 'transactional',
    n,
    html: '<p>hello</p>',
  });
  sink.reset();
  mark('seeded', 'start');
  const t0 = Date.now();
  service.kickOutbox();
  await until(async () => sink.count() >= n, 'seeded');
  const seededSeconds = (Date.now() - t0) / 1000;
  mark('seeded', 'end');
  return {
    messages: n,
    seededSeconds,
    seededPerSecond: n / seededSeconds,
    liveSeconds,
    liveAcceptSeconds,
    livePerSecond: n / liveSeconds,
    testSeconds,
    testAcceptSeconds,
    testPerSecond: n / testSeconds,
  };
}

/** BENCH_DRAIN_MESSAGES: the backlog of the drain phase (live, then test mode) and of the Temporal phase's drains. */
export const DRAIN_MESSAGES = Number(process.env.BENCH_DRAIN_MESSAGES || 5_000);

export type DrainPhaseResult = DrainResult & {
  /** The same measured again with the sink on a thread of its own (bench/sink.ts). */
  sinkThread: DrainResult;
  /** Transactional pickup while a bulk backlog drains as fast as the sink takes it. */
  pickup: PickupResult;
};

/** A backlog drained to a counting sink, beside what a pooled nodemailer client gets from the same sink. */
async function drainTo({ log, startService }: BenchContext, sink: CountingSink, database: string): Promise<DrainResult> {
  const connections = readConfig({}).workerConcurrency;
  log.info({ messages: DRAIN_MESSAGES, connections }, 'drain: the ceiling (pooled nodemailer to the counting sink)');
  // A discarded round first: the ceiling is not measured on code the JIT has not optimized yet.
  await smtpCeiling(sink.port, DRAIN_MESSAGES, connections);
  const ceilingBefore = await smtpCeiling(sink.port, DRAIN_MESSAGES, connections);
  const service = await startService(database, { smtpPort: sink.port, sendRatePerSecond: 100_000 });
  const drained = await benchDrain(service, sink, log, DRAIN_MESSAGES);
  await service.stop();
  const ceilingAfter = await smtpCeiling(sink.port, DRAIN_MESSAGES, connections);
  return { ...drained, ceilingBefore, ceilingAfter, ceilingPerSecond: (ceilingBefore + ceilingAfter) / 2 };
}

/** BENCHMARKS.md's "Delivery drain" section. */
function drainSection(drain: DrainPhaseResult): string {
  return `## Delivery drain

${n(drain.messages)} messages accepted through \`POST /emails/batch\` by four keys at once (a key admits 1,000 a second) from a separate
process (as every phase's load), timed from the first acceptance until the last left, with \`SEND_RATE_PER_SECOND\` lifted; live mail to a loopback
SMTP sink in the service's process that only counts, test mail to its final status. The ceiling: the same sink filled by one pooled nodemailer
transport with as many connections (${readConfig({}).workerConcurrency}) as \`WORKER_CONCURRENCY\`, ${n(drain.messages)} messages after a discarded round of as many,
measured before the drains and again after them; each drain is compared with the mean. Likewise the service drains a discarded backlog of
2,000 messages before the measured ones. The service delivers in SendBatch runs of up to 100 messages, its SMTP client on a thread of its own
(docs/architecture.md, "Delivering a backlog"). Then a fresh service with ${n(BULK_BACKLOG)} bulk messages seeded in SQL drains them to the same sink
while transactional sends arrive every 250 ms.

| Measure | Result | Goal (issue 20) |
|---|---|---|
| Ceiling: pooled nodemailer to the sink, mean of before and after the drains | ${f(drain.ceilingPerSecond, 0)} messages/s (${f(drain.ceilingBefore, 0)} before, ${f(drain.ceilingAfter, 0)} after) | |
| Live drain | ${f(drain.livePerSecond, 1)} messages/s (${f(drain.liveSeconds)} s; the last batch accepted after ${f(drain.liveAcceptSeconds)} s), ${f((drain.livePerSecond / drain.ceilingPerSecond) * 100, 0)}% of the ceiling | ≥ 80% and ≥ 300/s |
| Test-mode drain | ${f(drain.testPerSecond, 1)} messages/s (${f(drain.testSeconds)} s; the last batch accepted after ${f(drain.testAcceptSeconds)} s) | ≥ 1,000/s |
| Live drain of a backlog seeded in SQL (delivery alone: no API accepting in the same process meanwhile) | ${f(drain.seededPerSecond, 1)} messages/s (${f(drain.seededSeconds)} s), ${f((drain.seededPerSecond / drain.ceilingPerSecond) * 100, 0)}% of the ceiling | |
| Transactional pickup (accepted → handed to the sink) while ${n(drain.pickup.backlog)} bulk messages drain, ${drain.pickup.sends} sends 250 ms apart | p50 ${f(drain.pickup.p50, 0)} ms, **p99 ${f(drain.pickup.p99, 0)} ms**, max ${f(drain.pickup.max, 0)} ms; ${n(drain.pickup.bulkSent)} bulk messages left meanwhile | p99 < 1 s |

The same measured again on a fresh service with the sink on a thread of its own (\`bench/sink.ts\`), as a relay on another machine: it no
longer shares an event loop with the client it measures, so the ceiling's client and sink each have a core, while the service's API, engine,
SMTP client and PostgreSQL share the same two with the sink. The stricter comparison:

| Measure, sink on its own thread | Result |
|---|---|
| Ceiling | ${f(drain.sinkThread.ceilingPerSecond, 0)} messages/s (${f(drain.sinkThread.ceilingBefore, 0)} before, ${f(drain.sinkThread.ceilingAfter, 0)} after) |
| Live drain | ${f(drain.sinkThread.livePerSecond, 1)} messages/s (${f(drain.sinkThread.liveSeconds)} s; accepted after ${f(drain.sinkThread.liveAcceptSeconds)} s), ${f((drain.sinkThread.livePerSecond / drain.sinkThread.ceilingPerSecond) * 100, 0)}% of the ceiling |
| Test-mode drain | ${f(drain.sinkThread.testPerSecond, 1)} messages/s |
| Live drain of a backlog seeded in SQL | ${f(drain.sinkThread.seededPerSecond, 1)} messages/s, ${f((drain.sinkThread.seededPerSecond / drain.sinkThread.ceilingPerSecond) * 100, 0)}% of the ceiling |
`;
}

/**
 * The drain phase of `npm run bench` (BENCH_ONLY=drain): a backlog drained to a counting sink in the
 * service's process, then to one on a thread of its own, then transactional pickup while a bulk
 * backlog drains with the send rate lifted.
 */
export const drainPhase: Phase<'drain'> = {
  name: 'drain',
  async run(ctx) {
    const { log, startService } = ctx;
    const sink = await countingSink();
    const r = await drainTo(ctx, sink, 'bench_service_drain');
    // The same again against a sink on a thread of its own (bench/sink.ts): the stricter view.
    log.info('drain: again, the sink on its own thread');
    const threaded = await countingSink({ thread: true });
    const sinkThread = await drainTo(ctx, threaded, 'bench_service_drain_thread');
    await threaded.close();
    // Transactional pickup while a bulk backlog drains as fast as the sink takes it (the rate lifted).
    const pickupService = await startService('bench_service_drain_pickup', { smtpPort: sink.port, sendRatePerSecond: 100_000 });
    const pickup = await benchPickup(pickupService, log, BULK_BACKLOG, PICKUP_SENDS);
    await pickupService.stop();
    await sink.close();
    return { ...r, sinkThread, pickup };
  },
  section: drainSection,
};
