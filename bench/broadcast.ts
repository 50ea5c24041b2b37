/**
 * The broadcast phase of `npm run bench` (issue 18; BENCH_ONLY=broadcast): one organization seeded with 100,000
 * subscribed contacts by INSERT ... SELECT generate_series, a segment of all subscribed contacts
 * and a verified bulk-stream domain; one broadcast created over HTTP with an ADMIN key, timed from
 * the POST until its fan-out cursor (`broadcasts.enqueued`) reaches the frozen recipient count,
 * with the process's resident memory sampled throughout.
 */
import type { Logger } from 'pino';
import type { Service } from '../server/service';
import { createDomain, createKey } from '../core/provisioning';
import { benchOrganization } from './org';
import { f, n, type Phase } from './phase';
import { countingSink } from './sink';

export interface BroadcastResult {
  contacts: number;
  /** The frozen audience (every seeded contact is subscribed). */
  recipients: number;
  /** With a template rendering `{{first_name}}` and `{{plan}}` per recipient, or plain subject/html/text. */
  template: boolean;
  /** Contacts seeded by one statement. */
  seedSeconds: number;
  /** From the POST to the last recipient accepted (`enqueued` = `recipients`). */
  seconds: number;
  /** recipients / seconds. */
  perSecond: number;
  /** From the POST until the frozen count was seen (polled every 100 ms): dispatch, the run's start and the freeze statement. */
  freezeSeconds: number;
  /** Of that, from the broadcast's `created_at` to its `started_at` (the freeze's start): the dispatcher and the run's start. */
  dispatchSeconds: number;
  /** The pages: from the frozen count seen until the last recipient was accepted. */
  pagesSeconds: number;
  /** Resident memory at the POST, its peak while the fan-out ran, and at its end, MiB. */
  rssStartMiB: number;
  rssPeakMiB: number;
  rssEndMiB: number;
  /** Messages that reached the counting sink by the end of the measurement (live mail, at the platform send rate). */
  delivered: number;
  /** Rows in `emails` of the broadcast at the end (should be `recipients`). */
  stored: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (n: number) => n / 2 ** 20;

/** `n` subscribed contacts of one organization, with a first name and a `plan` property, in one statement. */
async function seedContacts(service: Service, organizationId: string, n: number): Promise<void> {
  const sql = service.db.orm.em.fork().getConnection();
  await sql.execute(
    `insert into contacts (id, organization_id, email, first_name, status, properties, created_at, updated_at)
     select gen_random_uuid(), ?, 'b' || i || '@broadcast.bench', 'Name' || i, 'subscribed',
            jsonb_build_object('plan', case when i % 3 = 0 then 'pro' else 'free' end), now() - make_interval(secs => i), now()
       from generate_series(1, ?) i`,
    [organizationId, n],
  );
  await sql.execute('analyze contacts');
}

export async function benchBroadcast(
  service: Service,
  sink: { count: () => number; reset: () => void },
  log: Logger,
  opts: { contacts: number; template: boolean },
): Promise<BroadcastResult> {
  const orm = service.db.orm;
  const org = await benchOrganization(orm, 'Bench broadcast');
  await createDomain(orm, org.id, 'news.bench.test', { verified: true, stream: 'bulk', warmup: false });
  const admin = (await createKey(orm, org.id, { name: 'admin', permission: 'admin', mode: 'live', rateLimit: 1000 })).token;
  const call = async (p: string, body?: unknown): Promise<any> => {
    const res = await fetch(`${service.url}/api/v1${p}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
    return res.json();
  };

  log.info({ contacts: opts.contacts }, 'broadcast: seeding contacts');
  const t0 = performance.now();
  await seedContacts(service, org.id, opts.contacts);
  const seedSeconds = (performance.now() - t0) / 1000;
  const segment = await call('/segments', { name: 'Everyone subscribed', filter: { all: [{ status: 'SUBSCRIBED' }] } });
  const content = opts.template
    ? await (async () => {
        await call('/templates', {
          name: 'Bench newsletter',
          slug: 'bench-newsletter',
          subject: 'News for {{first_name}}',
          html: '<h1>Hello {{first_name}}</h1><p>What is new on the {{plan}} plan this month.</p>',
          text: 'Hello {{first_name}}, what is new on the {{plan}} plan this month.',
          variables: [
            { key: 'first_name', type: 'string', fallback: 'there' },
            { key: 'plan', type: 'string', fallback: 'free' },
          ],
        });
        await call('/templates/bench-newsletter/publish', {});
        return { template: { slug: 'bench-newsletter' } };
      })()
    : { subject: 'News', html: '<h1>Hello</h1><p>What is new this month.</p>', text: 'Hello, what is new this month.' };

  const sql = orm.em.fork().getConnection();
  const state = async (id: string) => {
    const [row] = await sql.execute<
      {
        status: string;
        recipients: number | null;
        enqueued: number;
        created_at: string;
        started_at: string | null;
        failure: string | null;
      }[]
    >('select status, recipients, enqueued, created_at, started_at, failure from broadcasts where id = ?', [id]);
    return row;
  };

  sink.reset();
  const rssStart = process.memoryUsage().rss;
  let rssPeak = rssStart;
  const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 100);
  log.info({ template: opts.template }, 'broadcast: POST /broadcasts, waiting for the fan-out');
  const t1 = performance.now();
  const created = await call('/broadcasts', { segment_id: segment.id, from: 'News <news@news.bench.test>', name: 'Bench', ...content });
  let row = await state(created.id);
  let frozenAt: number | null = row.recipients !== null ? performance.now() : null;
  const deadline = Date.now() + 15 * 60_000;
  let lastLog = Date.now();
  while (row.recipients === null || row.enqueued < row.recipients) {
    if (row.status === 'failed' || row.status === 'canceled') throw new Error(`broadcast ${row.status}: ${row.failure}`);
    if (Date.now() > deadline) throw new Error(`broadcast: ${row.enqueued} of ${row.recipients} enqueued after 15 minutes`);
    if (Date.now() - lastLog > 5000) {
      log.info(
        { enqueued: row.enqueued, recipients: row.recipients, rssMiB: Math.round(mib(process.memoryUsage().rss)) },
        'broadcast: fan-out',
      );
      lastLog = Date.now();
    }
    await sleep(100);
    row = await state(created.id);
    if (frozenAt === null && row.recipients !== null) frozenAt = performance.now();
  }
  const t2 = performance.now();
  frozenAt ??= t2;
  const seconds = (t2 - t1) / 1000;
  clearInterval(sampler);
  const rssEnd = process.memoryUsage().rss;
  const delivered = sink.count();
  const [{ n: stored }] = await sql.execute<{ n: number }[]>('select count(*)::int as n from emails where broadcast_id = ?', [created.id]);
  return {
    contacts: opts.contacts,
    recipients: row.recipients!,
    template: opts.template,
    seedSeconds,
    seconds,
    perSecond: row.recipients! / seconds,
    freezeSeconds: (frozenAt - t1) / 1000,
    dispatchSeconds: (new Date(row.started_at!).getTime() - new Date(row.created_at).getTime()) / 1000,
    pagesSeconds: (t2 - frozenAt) / 1000,
    rssStartMiB: mib(rssStart),
    rssPeakMiB: mib(rssPeak),
    rssEndMiB: mib(rssEnd),
    delivered,
    stored,
  };
}

/** BENCH_BROADCAST_CONTACTS: the audience of the broadcast phase (contacts seeded in SQL, all subscribed). */
const BROADCAST_CONTACTS = Number(process.env.BENCH_BROADCAST_CONTACTS || 100_000);

/** One broadcast on its own service, with the service's start-to-stop wall time and, of it, the stop. */
export type BroadcastPhaseResult = (BroadcastResult & { wallSeconds: number; stopSeconds: number })[];

/** BENCHMARKS.md's "Broadcast fan-out" section. */
function broadcastSection(broadcasts: BroadcastPhaseResult): string {
  return `## Broadcast fan-out

${n(BROADCAST_CONTACTS)} subscribed contacts (first name and a \`plan\` property) seeded by \`INSERT ... SELECT generate_series\` in ${f(broadcasts[0].seedSeconds)} s,
a segment of every subscribed contact and a verified bulk-stream domain; one \`POST /broadcasts\` (ADMIN key), timed until the fan-out cursor
(\`broadcasts.enqueued\`, polled every 100 ms) reached the frozen recipient count: the audience frozen into \`broadcast_recipients\`, then
pages of 1,000 through the accept path, each message an \`emails\` row. Resident memory of the process (the service runs in it) sampled every
100 ms (the second broadcast runs in the same process after the first, so it starts from where the first left it). Live mail leaves meanwhile to a loopback counting sink at the platform send rate (12/s); the service stops when the last recipient is
accepted. Each broadcast on a fresh database: plain subject, html and text, then a published template rendering \`{{first_name}}\` and \`{{plan}}\` per recipient.

| Measure | ${broadcasts.map((b) => (b.template ? 'Template per recipient' : 'Plain content')).join(' | ')} | Goal |
|---|${broadcasts.map(() => '---|').join('')}---|
| Recipients enqueued per second | ${broadcasts.map((b) => `**${f(b.perSecond, 0)}** (${n(b.recipients)} in ${f(b.seconds)} s)`).join(' | ')} | ≥ 5,000 |
| POST → audience frozen (of it, created → freeze started) | ${broadcasts.map((b) => `${f(b.freezeSeconds, 2)} s (${f(b.dispatchSeconds, 2)} s)`).join(' | ')} | |
| Audience frozen → last recipient accepted | ${broadcasts.map((b) => `${f(b.pagesSeconds)} s`).join(' | ')} | |
| Process RSS at the POST → peak → end | ${broadcasts.map((b) => `${f(b.rssStartMiB, 0)} → ${f(b.rssPeakMiB, 0)} → ${f(b.rssEndMiB, 0)} MiB`).join(' | ')} | flat |
| Messages stored / delivered to the sink meanwhile | ${broadcasts.map((b) => `${n(b.stored)} / ${b.delivered}`).join(' | ')} | |
| Wall time: service start, seeding, broadcast, stop (of it, the stop) | ${broadcasts.map((b) => `${f(b.wallSeconds)} s (${f(b.stopSeconds)} s)`).join(' | ')} | |
`;
}

/**
 * The broadcast phase of `npm run bench` (BENCH_ONLY=broadcast): a broadcast to BROADCAST_CONTACTS
 * seeded contacts, plain and then with a template rendered per recipient, each on a fresh service
 * whose live mail goes to a counting sink at the platform send rate. The service stops as soon as
 * the fan-out has accepted every recipient: the backlog it leaves would otherwise drain into the
 * phases after it.
 */
export const broadcastPhase: Phase<'broadcast'> = {
  name: 'broadcast',
  async run({ log, startService }) {
    const sink = await countingSink();
    const results: BroadcastPhaseResult = [];
    for (const template of [false, true]) {
      const t0 = performance.now();
      const service = await startService('bench_service_broadcast', { smtpPort: sink.port });
      const r = await benchBroadcast(service, sink, log, { contacts: BROADCAST_CONTACTS, template });
      const t1 = performance.now();
      await service.stop();
      const t2 = performance.now();
      results.push({ ...r, wallSeconds: (t2 - t0) / 1000, stopSeconds: (t2 - t1) / 1000 });
    }
    await sink.close();
    return results;
  },
  section: broadcastSection,
};
