/**
 * The broadcast phase of `npm run bench` (issue 18): one organization seeded with 100,000
 * subscribed contacts by INSERT ... SELECT generate_series, a segment of all subscribed contacts
 * and a verified bulk-stream domain; one broadcast created over HTTP with an ADMIN key, timed from
 * the POST until its fan-out cursor (`broadcasts.enqueued`) reaches the frozen recipient count,
 * with the process's resident memory sampled throughout.
 */
import type { Logger } from 'pino';
import type { Service } from '../server/service';
import { createDomain, createKey } from '../core/provisioning';
import { benchOrganization } from './org';

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
