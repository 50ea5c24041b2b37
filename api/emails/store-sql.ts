import type { PreparedStatement } from '../../db/prepared';
import { KEY_AND_CHARGE_CTES } from '../middleware/auth';

/** What the store statement answers: the key (or nulls), whether it was charged, and each message's fate. */
export interface StoreResult {
  key_id: string | null;
  organization_id: string | null;
  rate_limit: number | null;
  charged: boolean;
  stored: { id: string; status: 'queued' | 'suppressed'; suppressed: string[] }[];
  refused: { id: string; code: 'domain_not_verified' | 'stream_mismatch' }[];
}

/**
 * Authenticates the request, charges its key and stores its messages, in one statement: the
 * acceptance hot path costs one round trip, atomic on its own, with no transaction block.
 *
 * Parameters: $1 token hash, $2 cost, $3 batch admission (see KEY_AND_CHARGE_CTES), $4 acceptance
 * time, then $5 messages, $6 recipients, $7 attachments, each a JSON array.
 *
 * - Nothing is stored unless the key exists and the charge passed (`p` is empty otherwise).
 * - Each message's sender domain must be a verified, undeleted domain of the key's organization
 *   that the key may use; bulk kinds need a bulk-stream domain. Other messages are refused, each
 *   on its own, and the rest are stored.
 * - A recipient is suppressed when the suppression list holds its address; a message whose every
 *   recipient is suppressed is stored as `suppressed` and never queued (enqueued_at is set).
 * - A message whose idempotency key the organization already used is skipped (`do nothing`, after
 *   waiting for a concurrent holder to commit); the caller answers it as a replay. Its
 *   recipients, events and attachments are skipped with it: each child insert joins the rows
 *   the message insert returned.
 * - Events are inserted in recipient order, so their ids (the API's event order) follow it.
 *
 * The column lists mirror the entities in db/entities (Email, Recipient, EmailEvent, Attachment):
 * GET /emails/:id and the SendEmail activities read what this stores through those entities, so
 * the API and delivery tests cover the mapping.
 */
const STORE_EMAILS_SQL = `
with ${KEY_AND_CHARGE_CTES},
p as (
  select k.organization_id as org, k.id as api_key, k.mode, k.domain_ids, $4::timestamptz as now from k, charged
), m as (
  select x.*, d.id as domain_id, d.name as domain_name, d.stream
    from jsonb_to_recordset($5::jsonb) as x(
      id uuid, pos int, from_domain text, bulk boolean, from_address text, to_addresses jsonb, cc_addresses jsonb,
      bcc_addresses jsonb, reply_to text, subject text, html text, text text, headers jsonb, tags jsonb, kind text,
      scheduled_at timestamptz, idempotency_key text)
    cross join p
    left join lateral (
      select d.id, d.name, d.stream from domains d
       where d.organization_id = p.org and lower(d.name) = x.from_domain and d.status = 'verified' and d.deleted_at is null
         and (p.domain_ids is null or p.domain_ids @> jsonb_build_array(d.id::text))
       limit 1
    ) d on true
), ok as (
  select * from m where domain_id is not null and (not bulk or stream = 'bulk')
), r as (
  select x.*, exists (select 1 from suppressions s, p where s.organization_id = p.org and s.email = x.address) as suppressed
    from jsonb_to_recordset($6::jsonb) as x(id uuid, email_id uuid, pos int, address text, field text)
   where x.email_id in (select id from ok)
), e as (
  insert into emails (id, organization_id, api_key_id, domain_id, from_address, to_addresses, cc_addresses, bcc_addresses,
                      reply_to, subject, html, text, headers, tags, kind, mode, status, scheduled_at, message_id,
                      idempotency_key, enqueued_at, created_at, updated_at)
  select ok.id, p.org, p.api_key, ok.domain_id, ok.from_address, ok.to_addresses, ok.cc_addresses, ok.bcc_addresses,
         ok.reply_to, ok.subject, ok.html, ok.text, ok.headers, ok.tags, ok.kind, p.mode,
         case when a.all_suppressed then 'suppressed' else 'queued' end, ok.scheduled_at, '<' || ok.id || '@' || ok.domain_name || '>',
         ok.idempotency_key, case when a.all_suppressed then p.now end, p.now, p.now
    from ok cross join p
    cross join lateral (select bool_and(r.suppressed) as all_suppressed from r where r.email_id = ok.id) a
   order by ok.pos
  on conflict (organization_id, idempotency_key) where idempotency_key is not null do nothing
  returning id, status
), rec as (
  insert into recipients (id, email_id, address, field, state, attempts, updated_at)
  select r.id, r.email_id, r.address, r.field, case when r.suppressed then 'suppressed' else 'pending' end, 0, p.now
    from r join e on e.id = r.email_id cross join p
), ev as (
  insert into email_events (email_id, organization_id, type, recipient, at)
  select r.email_id, p.org, case when r.suppressed then 'suppressed' else 'queued' end, r.address, p.now
    from r join e on e.id = r.email_id cross join p
   order by r.pos
), att as (
  insert into attachments (id, email_id, position, filename, content_type, size, content)
  select x.id, x.email_id, x.position, x.filename, x.content_type, x.size, decode(x.content, 'base64')
    from jsonb_to_recordset($7::jsonb) as x(id uuid, email_id uuid, position int, filename text, content_type text, size int, content text)
    join e on e.id = x.email_id
)
select (select k.id from k) as key_id, (select k.organization_id from k) as organization_id, (select k.rate_limit from k) as rate_limit,
       exists (select 1 from charged) as charged,
       coalesce((select json_agg(json_build_object('id', e.id, 'status', e.status, 'suppressed',
                   coalesce((select json_agg(r.address order by r.pos) from r where r.email_id = e.id and r.suppressed), '[]')))
                   from e), '[]') as stored,
       coalesce((select json_agg(json_build_object('id', m.id,
                   'code', case when m.domain_id is null then 'domain_not_verified' else 'stream_mismatch' end))
                   from m where m.domain_id is null or (m.bulk and m.stream <> 'bulk')), '[]') as refused`;

export const STORE_EMAILS: PreparedStatement = { name: 'store_emails_v2', text: STORE_EMAILS_SQL };

/** Parameters for STORE_EMAILS, in its order. */
export function storeEmailsParams(p: { tokenHash: string; cost: number; batch: boolean; now: Date; emails: unknown[]; recipients: unknown[]; attachments: unknown[] }): unknown[] {
  return [p.tokenHash, p.cost, p.batch, p.now, JSON.stringify(p.emails), JSON.stringify(p.recipients), JSON.stringify(p.attachments)];
}
