/**
 * The audience phase of `npm run bench` (BENCH_ONLY=audience): contact upserts under load (beside the baseline), then
 * one organization seeded with 100,000 contacts and 5 topics by INSERT ... SELECT generate_series,
 * where a two-condition segment is counted and the contacts list is paged with a topic filter,
 * over HTTP against the running service.
 */
import type { Service } from '../server/service';
import type { Orm } from '../db/orm';
import { createKey } from '../core/provisioning';
import { benchOrganization } from './org';
import { f, load, loadRow, n, SINGLE_CONCURRENCY, type LoadResult, type Phase } from './phase';

export const AUDIENCE_CONTACTS = 100_000;
const COUNT_RUNS = 30;
const LIST_RUNS = 200;

export interface Timings {
  runs: number;
  p50: number;
  p95: number;
  max: number;
}

export interface AudienceResult {
  seedSeconds: number;
  subscriptionRows: number;
  /** Two-condition segments: GET /segments/:id, which counts fresh. */
  segments: { name: string; filter: unknown; contactCount: number; timings: Timings }[];
  /** GET /contacts pages with a topic filter, following next_cursor. */
  lists: { query: string; timings: Timings }[];
}

/** A new contact per request (`__SEQ__`), with properties and a topic, as a sign-up form sends. */
export const UPSERT_BODY = {
  email: 'user-__SEQ__@audience.bench',
  first_name: 'Bench',
  properties: { plan: 'pro', seats: 3 },
  topics: ['newsletter'],
};

function timings(ms: number[]): Timings {
  const s = [...ms].sort((a, b) => a - b);
  const pct = (p: number) => s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
  return { runs: s.length, p50: pct(50), p95: pct(95), max: s[s.length - 1] };
}

async function timed(url: string, token: string): Promise<{ ms: number; body: any }> {
  const t0 = performance.now();
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  const body = await res.json();
  const ms = performance.now() - t0;
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${JSON.stringify(body).slice(0, 200)}`);
  return { ms, body };
}

/** 100,000 contacts, 5 topics (odd ones default opt-in) and about 30% explicit rows per topic, in three statements. */
export async function seedAudience(orm: Orm, organizationId: string): Promise<void> {
  const conn = orm.em.fork().getConnection();
  await conn.execute(
    `insert into topics (id, organization_id, slug, name, default_opt_in, created_at)
     select gen_random_uuid(), ?, 'topic-' || i, 'Topic ' || i, i % 2 = 1, now() from generate_series(1, 5) i`,
    [organizationId],
  );
  // Statuses: 1 in 20 unsubscribed, 1 in 50 bounced; created one second apart, newest first = lowest i.
  await conn.execute(
    `insert into contacts (id, organization_id, email, status, properties, created_at, updated_at)
     select gen_random_uuid(), ?, 'c' || i || '@audience.test',
            case when i % 20 = 0 then 'unsubscribed' when i % 50 = 0 then 'bounced' else 'subscribed' end,
            jsonb_build_object('n', i), now() - make_interval(secs => i), now()
       from generate_series(1, ${AUDIENCE_CONTACTS}) i`,
    [organizationId],
  );
  // About 30% of contacts have an explicit row per topic, a third of them unsubscribed.
  await conn.execute(
    `insert into subscriptions (contact_id, topic_id, state, source, changed_at)
     select c.id, t.id, case when abs(hashtext(c.email || t.slug || 's')) % 3 = 0 then 'unsubscribed' else 'subscribed' end, 'import', now()
       from contacts c cross join topics t
      where c.organization_id = ? and t.organization_id = ? and abs(hashtext(c.email || t.slug)) % 100 < 30`,
    [organizationId, organizationId],
  );
  await conn.execute('analyze contacts, subscriptions, topics');
}

export async function benchAudienceReads(service: Service): Promise<AudienceResult> {
  const orm = service.db.orm;
  const org = await benchOrganization(orm, 'Audience');
  const admin = (await createKey(orm, org.id, { name: 'admin', permission: 'admin', mode: 'live', rateLimit: 1000 })).token;
  const t0 = performance.now();
  await seedAudience(orm, org.id);
  const seedSeconds = (performance.now() - t0) / 1000;
  const [{ n: subscriptionRows }] = await orm.em
    .fork()
    .getConnection()
    .execute(`select count(*)::int as n from subscriptions s join topics t on t.id = s.topic_id where t.organization_id = ?`, [org.id]);

  const segments: AudienceResult['segments'] = [];
  for (const [name, filter] of [
    ['subscribed, topic with default opt-in', { all: [{ status: 'SUBSCRIBED' }, { topic: 'topic-1', state: 'SUBSCRIBED' }] }],
    ['subscribed, topic with default opt-out', { all: [{ status: 'SUBSCRIBED' }, { topic: 'topic-2', state: 'SUBSCRIBED' }] }],
  ] as const) {
    const res = await fetch(`${service.url}/api/v1/segments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, filter }),
    });
    const created = (await res.json()) as { id: string };
    if (res.status !== 201) throw new Error(`POST /segments answered ${res.status}`);
    const ms: number[] = [];
    let contactCount = 0;
    for (let i = 0; i < COUNT_RUNS; i++) {
      const r = await timed(`${service.url}/api/v1/segments/${created.id}`, admin);
      ms.push(r.ms);
      contactCount = r.body.contact_count;
    }
    segments.push({ name, filter, contactCount, timings: timings(ms) });
  }

  const lists: AudienceResult['lists'] = [];
  for (const query of ['topic=topic-1&state=subscribed', 'topic=topic-2&state=subscribed']) {
    const ms: number[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < LIST_RUNS; i++) {
      const r = await timed(`${service.url}/api/v1/contacts?${query}${cursor ? `&cursor=${cursor}` : ''}`, admin);
      ms.push(r.ms);
      cursor = r.body.next_cursor;
    }
    lists.push({ query, timings: timings(ms) });
  }
  return { seedSeconds, subscriptionRows, segments, lists };
}

export interface AudiencePhaseResult {
  /** POST /contacts under load, a new contact per request (after a discarded warm-up). */
  upsert: LoadResult;
  reads: AudienceResult;
}

/** The upserts' row of BENCHMARKS.md's first table (bench/sends.ts): a request accepts no message. */
export function audienceRow(r: AudiencePhaseResult): string {
  return loadRow(
    `POST /contacts, a new contact with properties and a topic per request (concurrency ${SINGLE_CONCURRENCY})`,
    r.upsert,
    null,
  );
}

/** The upserts' note under the first table. */
export function audienceNote(r: AudiencePhaseResult, base: LoadResult): string {
  return `- Contact upserts run at **${f((r.upsert.rps / base.rps) * 100, 0)}%** of the baseline's request rate (goal ≥ 40%).`;
}

/** BENCHMARKS.md's "Audience reads" section. */
function audienceSection({ reads }: AudiencePhaseResult): string {
  const segments = reads.segments.map(
    (s) =>
      `| \`GET /segments/:id\` (${s.name}) | contact_count ${s.contactCount} | ${s.timings.runs} | ${f(s.timings.p50)} | ${f(s.timings.p95)} | ${f(s.timings.max)} | < 100 ms |`,
  );
  const lists = reads.lists.map(
    (l) =>
      `| \`GET /contacts?${l.query}\`, pages of 25 following next_cursor | | ${l.timings.runs} | ${f(l.timings.p50)} | ${f(l.timings.p95)} | ${f(l.timings.max)} | p95 < 20 ms |`,
  );
  return `## Audience reads

${n(AUDIENCE_CONTACTS)} contacts and 5 topics in one organization (seeded by \`INSERT ... SELECT generate_series\` in ${f(reads.seedSeconds)} s; ${n(reads.subscriptionRows)} explicit subscription rows), measured over HTTP
one request at a time, authentication included. Query plans: docs/audience.md.

| Request | Result | Runs | p50 ms | p95 ms | max ms | Goal |
|---|---|---|---|---|---|---|
${[...segments, ...lists].join('\n')}
`;
}

export const audiencePhase: Phase<'audience'> = {
  name: 'audience',
  async run({ log, startService }) {
    const service = await startService('bench_service_audience');
    const org = await benchOrganization(service.db.orm, 'Bench audience');
    const tokens: string[] = [];
    for (let i = 0; i < SINGLE_CONCURRENCY; i++)
      tokens.push(
        (await createKey(service.db.orm, org.id, { name: `bench-${i}`, permission: 'send', mode: 'live', rateLimit: 1000 })).token,
      );
    log.info('POST /contacts (a new contact per request)');
    await load(`${service.url}/api/v1/contacts`, tokens, UPSERT_BODY, SINGLE_CONCURRENCY);
    const upsert = await load(`${service.url}/api/v1/contacts`, tokens, UPSERT_BODY, SINGLE_CONCURRENCY);
    log.info({ contacts: AUDIENCE_CONTACTS }, 'segments and lists over a seeded audience');
    const reads = await benchAudienceReads(service);
    await service.stop();
    return { upsert, reads };
  },
  section: audienceSection,
};
