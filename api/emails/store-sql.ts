import type { PreparedStatement } from '../../db/prepared';

/** What the store statement answers for each message it inserted. */
export interface StoredRow {
  id: string;
  status: 'queued' | 'suppressed';
  /** Lower-cased recipients dropped because they are on the suppression list. */
  suppressed: string[];
}

/**
 * Stores a request's messages in one statement (the acceptance hot path: one round trip, atomic
 * on its own, no transaction block). Parameters, in order: organization id, API key id, key mode,
 * acceptance time, then the messages, recipients and attachments as JSON arrays.
 *
 * - A recipient is suppressed when the suppression list holds its address; a message whose every
 *   recipient is suppressed is stored as `suppressed` and is never queued (enqueued_at is set).
 * - A message whose idempotency key the organization already used is skipped (`do nothing`); the
 *   caller resolves it as a replay. Its recipients, events and attachments are skipped with it,
 *   because each child insert joins the rows the message insert returned.
 * - Events are inserted in recipient order, so their ids (the API's event order) follow it.
 *
 * The column lists mirror the entities in db/entities (Email, Recipient, EmailEvent, Attachment):
 * GET /emails/:id and the SendEmail activities read what this stores through those entities, so
 * the API and delivery tests cover the mapping.
 */
const STORE_EMAILS_SQL = `
with p as (
  select $1::uuid as org, $2::uuid as api_key, $3::text as mode, $4::timestamptz as now
), m as (
  select * from jsonb_to_recordset($5::jsonb) as x(
    id uuid, pos int, domain_id uuid, from_address text, to_addresses jsonb, cc_addresses jsonb, bcc_addresses jsonb,
    reply_to text, subject text, html text, text text, headers jsonb, tags jsonb, kind text, scheduled_at timestamptz,
    message_id text, idempotency_key text)
), r as (
  select x.*, exists (select 1 from suppressions s, p where s.organization_id = p.org and s.email = x.address) as suppressed
    from jsonb_to_recordset($6::jsonb) as x(id uuid, email_id uuid, pos int, address text, field text)
), e as (
  insert into emails (id, organization_id, api_key_id, domain_id, from_address, to_addresses, cc_addresses, bcc_addresses,
                      reply_to, subject, html, text, headers, tags, kind, mode, status, scheduled_at, message_id,
                      idempotency_key, enqueued_at, created_at, updated_at)
  select m.id, p.org, p.api_key, m.domain_id, m.from_address, m.to_addresses, m.cc_addresses, m.bcc_addresses,
         m.reply_to, m.subject, m.html, m.text, m.headers, m.tags, m.kind, p.mode,
         case when a.all_suppressed then 'suppressed' else 'queued' end, m.scheduled_at, m.message_id,
         m.idempotency_key, case when a.all_suppressed then p.now end, p.now, p.now
    from m cross join p
    cross join lateral (select bool_and(r.suppressed) as all_suppressed from r where r.email_id = m.id) a
   order by m.pos
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
select e.id, e.status,
       coalesce((select array_agg(r.address order by r.pos) from r where r.email_id = e.id and r.suppressed), '{}') as suppressed
  from e`;

export const STORE_EMAILS: PreparedStatement = { name: 'store_emails_v1', text: STORE_EMAILS_SQL };

/** Parameters for STORE_EMAILS_SQL, in its order. */
export function storeEmailsParams(p: { organizationId: string; apiKeyId: string; mode: string; now: Date; emails: unknown[]; recipients: unknown[]; attachments: unknown[] }): unknown[] {
  return [p.organizationId, p.apiKeyId, p.mode, p.now, JSON.stringify(p.emails), JSON.stringify(p.recipients), JSON.stringify(p.attachments)];
}
