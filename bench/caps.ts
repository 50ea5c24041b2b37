import type { Logger } from 'pino';
import type { Service } from '../server/service';
import type { Clock } from '../core/clock';
import { createDomain, createKey, createOrganization } from '../core/provisioning';
import { benchOrganization } from './org';
import { f, n, type Phase } from './phase';

export interface ParkResult {
  messages: number;
  parkSeconds: number;
  parkedPerSecond: number;
  /** Row updates on `emails` while parking, per parked message (pg_stat_user_tables). */
  updatesPerMessage: number;
  releaseSeconds: number;
  releasedPerSecond: number;
  /** Resident memory before the release and its peak during it, MiB. */
  rssBeforeMiB: number;
  rssPeakMiB: number;
}

export interface PickupResult {
  backlog: number;
  sends: number;
  p50: number;
  p99: number;
  max: number;
  /** Bulk messages that left during the measurement (the backlog was draining, not stalled). */
  bulkSent: number;
}

/** A clock the bench moves ahead to simulate the UTC day turn. */
export class BenchClock implements Clock {
  aheadMs = 0;
  now(): Date {
    return new Date(Date.now() + this.aheadMs);
  }
}

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (n: number) => n / 2 ** 20;

/** `n` live queued messages of one recipient each from `domainId`, inserted in one statement each (rows only, as the API stores them). */
export async function seed(
  service: Service,
  q: { orgId: string; keyId: string; domainId: string; domain: string; stream: string; n: number; html?: string },
): Promise<void> {
  const sql = service.db.orm.em.fork().getConnection();
  await sql.execute(
    `
with e as (
  insert into emails (id, organization_id, api_key_id, domain_id, from_address, to_addresses, subject, text, html, mode, status,
                      message_id, created_at, updated_at, stream)
  select id, ?, ?, ?, 'bench@' || ?, jsonb_build_array('r' || g || '@example.com'), 'Parked', 'hello', ?::text, 'live', 'queued',
         '<' || id || '@' || ? || '>', now() + g * interval '1 microsecond', now(), ?
    from (select svc_uuidv7() as id, g from generate_series(1, ?) g) s
  returning id, to_addresses
)
insert into recipients (id, email_id, address, field, state, attempts, updated_at)
select svc_uuidv7(), e.id, e.to_addresses->>0, 'to', 'pending', 0, now() from e`,
    [q.orgId, q.keyId, q.domainId, q.domain, q.html ?? null, q.domain, q.stream, q.n],
  );
}

async function count(service: Service, sql: string, params: unknown[] = []): Promise<number> {
  const [row] = await service.db.orm.em.fork().getConnection().execute(sql, params);
  return Number(Object.values(row)[0]);
}

/**
 * Parks `n` messages behind an organization cap that is already spent, then turns the simulated
 * day and releases them: parking is the outbox's reserve statement per message (one row update
 * on `emails` each), release the release step's paged statements. Measured from the first kick
 * to the last row changed; RSS sampled every 50 ms during the release.
 */
export async function benchPark(service: Service, clock: BenchClock, log: Logger, n: number): Promise<ParkResult> {
  const orm = service.db.orm;
  const org = await createOrganization(orm, 'Bench caps', 'standard');
  const domain = await createDomain(orm, org.id, 'caps.bench.test', { verified: true, warmup: false });
  const key = await createKey(orm, org.id, { name: 'k', permission: 'send', mode: 'live', rateLimit: 1000 });
  const sql = orm.em.fork().getConnection();
  // A cap of 1, taken by the first message: every other one parks.
  await sql.execute(`update organizations set daily_send_cap = 1 where id = ?`, [org.id]);
  log.info({ messages: n }, 'caps: seeding queued messages');
  await seed(service, { orgId: org.id, keyId: key.key.id, domainId: domain.id, domain: domain.name, stream: 'transactional', n });
  await sql.execute(`analyze emails`);
  const updatesBefore = await count(service, `select n_tup_upd from pg_stat_user_tables where relname = 'emails'`);
  log.info('caps: parking');
  const t0 = Date.now();
  service.kickOutbox();
  while ((await count(service, `select count(*) from emails where organization_id = ? and waiting_reason is not null`, [org.id])) < n - 1) {
    await sleep(200);
  }
  const parkSeconds = (Date.now() - t0) / 1000;
  // The statistics collector lags a little behind the commits.
  await sleep(1000);
  const updates = (await count(service, `select n_tup_upd from pg_stat_user_tables where relname = 'emails'`)) - updatesBefore;

  // The day turns; the cap is lifted (0: none on a service plan) so the new day admits them all.
  await sql.execute(`update organizations set daily_send_cap = 0 where id = ?`, [org.id]);
  clock.aheadMs += 86_400_000;
  const rssBefore = process.memoryUsage().rss;
  let rssPeak = rssBefore;
  const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 50);
  log.info('caps: releasing at the simulated day turn');
  const t1 = Date.now();
  await service.capRelease.releaseNow();
  // The release loop's own timer may take pages of the same day turn meanwhile (a page another
  // pass holds is skipped, not waited for): timed until the database says none is parked.
  const parked = () => count(service, `select count(*) from emails where organization_id = ? and waiting_reason is not null`, [org.id]);
  const deadline = Date.now() + 60_000;
  let still = await parked();
  while (still !== 0 && Date.now() < deadline) {
    await sleep(20);
    still = await parked();
  }
  const releaseSeconds = (Date.now() - t1) / 1000;
  clearInterval(sampler);
  if (still !== 0) throw new Error(`${still} of ${n - 1} still parked a minute after the release`);
  const woke = n - 1;
  return {
    messages: n - 1,
    parkSeconds,
    parkedPerSecond: (n - 1) / parkSeconds,
    updatesPerMessage: updates / (n - 1),
    releaseSeconds,
    releasedPerSecond: woke / releaseSeconds,
    rssBeforeMiB: mib(rssBefore),
    rssPeakMiB: mib(rssPeak),
  };
}

/**
 * Transactional pickup behind a bulk backlog: `backlog` bulk messages queued (seeded), then one
 * transactional send through the API every 250 ms; each is timed from acceptance to its `sent`
 * event (pickup, the claim and one SMTP transaction to the loopback relay), at the platform send
 * rate the service runs with.
 */
export async function benchPickup(service: Service, log: Logger, backlog: number, sends: number): Promise<PickupResult> {
  const orm = service.db.orm;
  const org = await benchOrganization(orm, 'Bench streams');
  const bulk = await createDomain(orm, org.id, 'news.bench.test', { verified: true, stream: 'bulk', warmup: false });
  await createDomain(orm, org.id, 'app.bench.test', { verified: true, warmup: false });
  const key = await createKey(orm, org.id, { name: 'k', permission: 'send', mode: 'live', rateLimit: 1000 });
  log.info({ backlog }, 'streams: seeding the bulk backlog');
  await seed(service, { orgId: org.id, keyId: key.key.id, domainId: bulk.id, domain: bulk.name, stream: 'bulk', n: backlog });
  service.kickOutbox();
  await sleep(2000);
  const bulkBefore = await count(service, `select count(*) from emails where domain_id = ? and status <> 'queued'`, [bulk.id]);
  log.info({ sends }, 'streams: transactional sends behind the backlog');
  const ids: string[] = [];
  for (let i = 0; i < sends; i++) {
    const res = await fetch(`${service.url}/api/v1/emails`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ from: 'app@app.bench.test', to: `t${i}@example.com`, subject: 'Receipt', text: 'hi' }),
    });
    if (!res.ok) throw new Error(`POST /emails: ${res.status} ${await res.text()}`);
    ids.push(((await res.json()) as { id: string }).id);
    await sleep(250);
  }
  const deadline = Date.now() + 60_000;
  let latencies: number[] = [];
  while (Date.now() < deadline) {
    const rows = await orm.em
      .fork()
      .getConnection()
      .execute<{ ms: string }[]>(
        `select extract(epoch from (ev.at - e.created_at)) * 1000 as ms
           from emails e join email_events ev on ev.email_id = e.id and ev.type = 'sent'
          where e.id = any(?::uuid[])`,
        [`{${ids.join(',')}}`],
      );
    latencies = rows.map((r) => Number(r.ms));
    if (latencies.length === ids.length) break;
    await sleep(250);
  }
  if (latencies.length < ids.length) throw new Error(`only ${latencies.length} of ${ids.length} transactional messages were sent`);
  const bulkSent = (await count(service, `select count(*) from emails where domain_id = ? and status <> 'queued'`, [bulk.id])) - bulkBefore;
  return { backlog, sends, p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: Math.max(...latencies), bulkSent };
}

/** BENCH_PARKED: messages parked behind a spent cap and released at a simulated day turn. */
const PARKED = Number(process.env.BENCH_PARKED || 100_000);
/** BENCH_BULK_BACKLOG: the bulk backlog transactional pickup is measured behind (here and in bench/drain.ts). */
export const BULK_BACKLOG = Number(process.env.BENCH_BULK_BACKLOG || 10_000);
/** BENCH_PICKUP_SENDS: transactional sends timed behind that backlog. */
export const PICKUP_SENDS = Number(process.env.BENCH_PICKUP_SENDS || 60);

export interface CapsPhaseResult {
  park: ParkResult;
  pickup: PickupResult;
}

/** BENCHMARKS.md's "Daily caps and stream isolation" section. */
function capsSection(caps: CapsPhaseResult): string {
  return `## Daily caps and stream isolation

Parking: ${n(caps.park.messages)} live messages (seeded in SQL) behind an organization cap already spent, parked by the
outbox's reserve statement, one per message. Release: the simulated clock turns the UTC day and the release step
wakes them all in pages of 1,000. Pickup: ${n(caps.pickup.backlog)} bulk messages queued (seeded), then one transactional
send every 250 ms through the API, each timed from acceptance to its \`sent\` event, at the platform send rate (12/s).

| Measure | Result | Goal |
|---|---|---|
| Parking rate | ${f(caps.park.parkedPerSecond, 0)} messages/s (${f(caps.park.parkSeconds)} s) | |
| Row updates on \`emails\` per parked message | ${f(caps.park.updatesPerMessage, 2)} | ≤ 1 |
| Release rate at the day turn | ${f(caps.park.releasedPerSecond, 0)} messages/s (${f(caps.park.releaseSeconds)} s) | |
| Process RSS before the release → peak during it | ${f(caps.park.rssBeforeMiB, 0)} → ${f(caps.park.rssPeakMiB, 0)} MiB | flat |
| Transactional pickup p50 behind ${n(caps.pickup.backlog)} bulk | ${f(caps.pickup.p50, 0)} ms | |
| Transactional pickup p99 behind ${n(caps.pickup.backlog)} bulk | ${f(caps.pickup.p99, 0)} ms | < 1,000 ms |
| Transactional pickup, slowest | ${f(caps.pickup.max, 0)} ms | |
| Bulk messages sent meanwhile (the backlog drains at the send rate) | ${caps.pickup.bulkSent} | |
`;
}

/**
 * The caps phase of `npm run bench` (BENCH_ONLY=caps): parking and release behind a spent cap, then
 * transactional pickup behind a bulk backlog, each on a service of its own.
 */
export const capsPhase: Phase<'caps'> = {
  name: 'caps',
  async run({ log, startService }) {
    const clock = new BenchClock();
    const parkService = await startService('bench_service_caps', { clock });
    const park = await benchPark(parkService, clock, log, PARKED);
    await parkService.stop();
    const streamService = await startService('bench_service_streams');
    const pickup = await benchPickup(streamService, log, BULK_BACKLOG, PICKUP_SENDS);
    await streamService.stop();
    return { park, pickup };
  },
  section: capsSection,
};
