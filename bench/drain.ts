import nodemailer from 'nodemailer';
import type { Logger } from 'pino';
import type { Service } from '../server/service';
import { createDomain, createKey } from '../core/provisioning';
import { benchOrganization } from './org';
import { seed } from './caps';
import { loadProcess } from './load-process';

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
