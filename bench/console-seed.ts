/**
 * The console phase's data (bench/console.ts): an organization's message history written straight
 * into `emails`, `recipients` and `email_events` by INSERT ... SELECT generate_series, in rows
 * shaped as the send store and delivery write them (db/sql/store-emails.ts, db/sql/email-events.ts).
 */
import type { Logger } from 'pino';
import type { Orm } from '../db/orm';

/** A UUIDv7 whose time is `at` (svc_uuidv7 takes the clock's time; a message's id carries its acceptance time). */
const uuidAt = (at: string) =>
  `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing
     substring(int8send(floor(extract(epoch from ${at}) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`;

/**
 * Messages `lo`..`hi` of `n` (1 the newest), `created_at` spread evenly over the last 30 days. The
 * newest 0.2% are still queued; the others, by a fixed spread: 88% delivered, 6% sent without a
 * delivery event, 3% bounced, 1% failed, 0.5% complained, 1% suppressed at acceptance, 0.5%
 * canceled. Each message has one `to` recipient among 200,000 addresses, and the events its status
 * took (queued, sent, delivered, ...; a suppressed one only `suppressed`), a second apart. Every
 * row has `enqueued_at` set, so the outbox leaves them all alone (as mail whose workflow ran).
 */
const SEED_SQL = `
with s as (
  select g, ${uuidAt('at')} as id, at,
         case when g <= ?::int / 500 then 'queued'
              when b < 880 then 'delivered' when b < 940 then 'sent' when b < 970 then 'bounced' when b < 980 then 'failed'
              when b < 985 then 'complained' when b < 995 then 'suppressed' else 'canceled' end as status,
         'user' || (g::bigint * 104729) % 200000 || '@example.com' as address,
         case g % 3 when 0 then 'receipt' when 1 then 'password_reset' end as kind
    from generate_series(?::int, ?::int) g,
         lateral (select now() - interval '30 days' * (g::float8 / ?::int) as at, (g::bigint * 7919) % 1000 as b) x
), e as (
  insert into emails (id, organization_id, api_key_id, domain_id, from_address, to_addresses, subject, html, text, headers, tags,
                      kind, mode, status, message_id, enqueued_at, sent_at, created_at, updated_at, source, stream)
  select s.id, ?, ?, ?, 'Acme <hello@' || ?::text || '>', jsonb_build_array(s.address), 'Your order #' || s.g,
         '<p>Hello,</p><p>thank you for your order <strong>#' || s.g || '</strong>. It ships tomorrow.</p>',
         'Hello, thank you for your order #' || s.g || '. It ships tomorrow.',
         case when s.g % 10 = 0 then '{"X-Entity-Ref-ID": "order-' || s.g || '"}' else '{}' end::jsonb,
         case when s.kind is null then '[]' else jsonb_build_array(jsonb_build_object('name', 'kind', 'value', s.kind)) end,
         s.kind, 'live', s.status, '<' || s.id || '@' || ?::text || '>', s.at,
         case when s.status in ('sent', 'delivered', 'bounced', 'complained') then s.at + interval '1 second' end,
         s.at, s.at + interval '2 seconds', case when s.g % 10 = 0 then 'smtp' else 'api' end, 'transactional'
    from s
), r as (
  insert into recipients (id, email_id, address, field, state, attempts, updated_at)
  select ${uuidAt('s.at')}, s.id, s.address, 'to',
         case when s.status in ('queued', 'canceled') then 'pending' else s.status end,
         case when s.status in ('queued', 'canceled', 'suppressed') then 0 else 1 end, s.at + interval '2 seconds'
    from s
)
insert into email_events (email_id, organization_id, type, recipient, at, bounce_type, detail)
select s.id, ?, ev.type, s.address, s.at + (ev.n - 1) * interval '1 second',
       case when ev.type = 'bounced' then 'hard' end,
       case ev.type when 'bounced' then '550 5.1.1 <' || s.address || '>: user unknown'
                    when 'failed' then '554 5.7.1 message rejected' end
  from s cross join lateral unnest(case s.status
         when 'queued' then array['queued'] when 'canceled' then array['queued']
         when 'sent' then array['queued', 'sent'] when 'delivered' then array['queued', 'sent', 'delivered']
         when 'bounced' then array['queued', 'sent', 'bounced'] when 'failed' then array['queued', 'failed']
         when 'complained' then array['queued', 'sent', 'delivered', 'complained'] else array['suppressed'] end)
       with ordinality as ev(type, n)
 order by s.g desc, ev.n`;

export interface SeedTarget {
  organizationId: string;
  keyId: string;
  domainId: string;
  domain: string;
}

/** Rows a statement writes: 100,000 messages and their recipients and events. */
const CHUNK = 100_000;

/** `n` messages of `t`, oldest first, a statement per 100,000, logged as they go. */
export async function seedMessages(orm: Orm, log: Logger, t: SeedTarget, n: number, label: string): Promise<void> {
  const conn = orm.em.fork().getConnection();
  for (let hi = n; hi >= 1; hi -= CHUNK) {
    const lo = Math.max(1, hi - CHUNK + 1);
    await conn.execute(SEED_SQL, [n, lo, hi, n, t.organizationId, t.keyId, t.domainId, t.domain, t.domain, t.organizationId]);
    log.info({ inserted: n - lo + 1, of: n }, `console: seeding ${label}`);
  }
}
