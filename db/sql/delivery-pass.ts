import type { Orm } from '../orm';
import type { EmailStatus, EventType, KeyMode, RecipientState, RetryReason, Stream, Transport } from '../entities';
import { runPrepared, type PreparedStatement } from '../prepared';
import { insertEvents } from './email-events';
import type { PgTimestamp } from './pg-types';

/**
 * The statements of one delivery pass (activities/delivery-pass.ts deliverMany): read the claimed
 * messages with their recipients, commit the due ones `in_flight`, read the sender identities,
 * then write every outcome at once. Hand-written instead of MikroORM entities because a pass
 * runs for every message that leaves: hydrating and diffing entities cost more CPU per message
 * than the statements themselves (docs/architecture.md, "Delivering a backlog").
 */

/** A claimed message as a pass needs it. */
export interface PassEmail {
  id: string;
  organization_id: string;
  domain_id: string;
  from_address: string;
  to_addresses: string[];
  cc_addresses: string[];
  bcc_addresses: string[];
  reply_to: string | null;
  subject: string;
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
  kind: string | null;
  topic_id: string | null;
  track_opens: boolean;
  track_clicks: boolean;
  mode: KeyMode;
  stream: Stream;
  status: EmailStatus;
  message_id: string;
  created_at: PgTimestamp;
  scheduled_at: PgTimestamp | null;
  /** Times an MX refused it for now (direct delivery): its next backoff step. */
  deferrals: number;
  /** Set while it waits for its next direct-delivery attempt (back in `queued`, unclaimed). */
  retry_reason: string | null;
  /** The run whose claim holds it (`sending`): a pass of another run leaves it alone. */
  claimed_by: string | null;
  has_attachments: boolean;
  /** [id, address, state] in id order. */
  recipients: [string, string, RecipientState][];
}

const READ_EMAILS: PreparedStatement = {
  name: 'delivery_pass_read_v3',
  text: `
select e.id, e.organization_id, e.domain_id, e.from_address, e.to_addresses, e.cc_addresses, e.bcc_addresses, e.reply_to,
       e.subject, e.html, e.text, e.headers, e.kind, e.topic_id, e.track_opens, e.track_clicks, e.mode, e.stream, e.status,
       e.message_id, e.created_at, e.scheduled_at, e.deferrals, e.retry_reason, e.claimed_by,
       exists (select 1 from attachments a where a.email_id = e.id) as has_attachments,
       coalesce((select json_agg(json_build_array(r.id, r.address, r.state) order by r.id) from recipients r where r.email_id = e.id), '[]')
         as recipients
  from emails e
 where e.id = any($1::uuid[])`,
};

/** The messages among `ids` that exist, each with its recipients. */
export function readPassEmails(orm: Orm, ids: string[]): Promise<PassEmail[]> {
  return runPrepared<PassEmail>(orm, READ_EMAILS, [ids]);
}

/**
 * Commits the recipients about to be handed to the relay `in_flight` (one more attempt), before
 * any SMTP transaction: a retry then knows these may already have been handed over.
 */
const MARK_IN_FLIGHT: PreparedStatement = {
  name: 'delivery_pass_in_flight_v1',
  text: `
update recipients set state = 'in_flight', attempts = attempts + 1, updated_at = $2
 where id = any($1::uuid[]) and state in ('pending', 'in_flight')`,
};

export async function markInFlight(orm: Orm, recipientIds: string[], at: Date): Promise<void> {
  if (recipientIds.length > 0) await runPrepared(orm, MARK_IN_FLIGHT, [recipientIds, at]);
}

export interface PassAttachment {
  email_id: string;
  filename: string;
  content_type: string;
  content: Buffer;
}

const READ_ATTACHMENTS: PreparedStatement = {
  name: 'delivery_pass_attachments_v1',
  text: `
select email_id, filename, content_type, content from attachments where email_id = any($1::uuid[]) order by email_id, position`,
};

export function readPassAttachments(orm: Orm, emailIds: string[]): Promise<PassAttachment[]> {
  return emailIds.length === 0 ? Promise.resolve([]) : runPrepared<PassAttachment>(orm, READ_ATTACHMENTS, [emailIds]);
}

/** A sender domain's identity, with its organization's name and postal address (the bulk footer). */
export interface PassDomain {
  id: string;
  name: string;
  dkim_selector: string | null;
  dkim_private_key_enc: string | null;
  /** The active Ed25519 key signed alongside the RSA one (RFC 8463); null for most domains. */
  dkim_ed25519_selector: string | null;
  dkim_ed25519_private_key_enc: string | null;
  return_path_host: string | null;
  tracking_host: string | null;
  organization_name: string;
  postal_address: string | null;
  /** The domain's transport, or its organization's when the domain has none of its own. */
  transport: Transport;
}

const READ_DOMAINS: PreparedStatement = {
  name: 'delivery_pass_domains_v4',
  // The signing key is the domain's active RSA key in dkim_keys (issue 41); a domain given its key
  // on its row alone (no key rows yet) signs with that one. An active Ed25519 key signs alongside.
  text: `
select d.id, d.name, coalesce(k.selector, d.dkim_selector) as dkim_selector,
       case when k.id is not null then k.private_key_enc else d.dkim_private_key_enc end as dkim_private_key_enc,
       e.selector as dkim_ed25519_selector, e.private_key_enc as dkim_ed25519_private_key_enc,
       d.return_path_host, d.tracking_host,
       o.name as organization_name, o.postal_address, coalesce(d.transport, o.transport) as transport
  from domains d join organizations o on o.id = d.organization_id
  left join lateral (
    select id, selector, private_key_enc from dkim_keys
     where domain_id = d.id and state = 'active' and algorithm = 'rsa' order by activated_at desc nulls last limit 1) k on true
  left join lateral (
    select selector, private_key_enc from dkim_keys
     where domain_id = d.id and state = 'active' and algorithm = 'ed25519' order by activated_at desc nulls last limit 1) e on true
 where d.id = any($1::uuid[])`,
};

export function readPassDomains(orm: Orm, domainIds: string[]): Promise<PassDomain[]> {
  return runPrepared<PassDomain>(orm, READ_DOMAINS, [domainIds]);
}

/** What a pass settled, written by one statement. */
export interface PassOutcomes {
  at: Date;
  /** Recipients whose state the pass changed; `tried` counts an attempt not yet counted (test mode: no in_flight step). */
  recipients: { id: string; state: RecipientState; tried: number }[];
  /** In the order they happened. */
  events: {
    emailId: string;
    organizationId: string;
    type: EventType;
    recipient: string;
    bounceType: string | null;
    detail: string | null;
  }[];
  /**
   * Messages the pass finished, with their status; `sent` sets sent_at once. `retry`: an MX refused
   * some recipients for now (direct delivery): the message goes back to `queued`, out of the
   * outbox until `at` (the release step puts it back), with why and the reply.
   */
  emails: { id: string; status: EmailStatus; sent: boolean; retry?: { reason: RetryReason; at: Date; reply: string } }[];
}

/**
 * Every outcome of a pass in one statement, so recipient states, events (and the webhook
 * deliveries their trigger adds) and message statuses commit together or not at all.
 */
const RECORD_OUTCOMES: PreparedStatement = {
  name: 'delivery_pass_outcomes_v4',
  text: `
with rc as (
  update recipients r set state = u.state, attempts = r.attempts + u.tried, updated_at = $1
    from unnest($2::uuid[], $3::text[], $4::int[]) as u(id, state, tried)
   where r.id = u.id
  returning 1
), ev as (
  ${insertEvents(
    {
      emailId: 'u.email_id',
      organizationId: 'u.organization_id',
      type: 'u.type',
      recipient: 'u.recipient',
      at: '$1',
      bounceType: 'u.bounce_type',
      detail: 'u.detail',
    },
    `from unnest($5::uuid[], $6::uuid[], $7::text[], $8::text[], $9::text[], $10::text[])
         with ordinality as u(email_id, organization_id, type, recipient, bounce_type, detail, n)
   order by u.n
  returning 1`,
  )}
), em as (
  update emails e set status = u.status, updated_at = $1,
         sent_at = case when u.sent then coalesce(e.sent_at, $1) else e.sent_at end,
         retry_reason = u.retry_reason, retry_at = u.retry_at, last_reply = coalesce(u.last_reply, e.last_reply),
         deferrals = e.deferrals + (u.retry_reason is not null)::int,
         claimed_by = case when u.retry_reason is null then e.claimed_by end,
         -- Answered: no longer waiting on the relay (db/sql/relay-refusals.ts).
         relay_retry_at = null
    from unnest($11::uuid[], $12::text[], $13::boolean[], $14::text[], $15::timestamptz[], $16::text[])
         as u(id, status, sent, retry_reason, retry_at, last_reply)
   -- Back to queued only from sending: an engine's second try of a pass that deferred it cannot
   -- move it again once a new run has claimed it.
   where e.id = u.id and (u.retry_reason is null or e.status = 'sending')
  returning 1
)
select (select count(*) from rc)::int as recipients, (select count(*) from ev)::int as events,
       (select count(*) from em)::int as emails`,
};

export async function recordPassOutcomes(orm: Orm, o: PassOutcomes): Promise<void> {
  if (o.recipients.length === 0 && o.events.length === 0 && o.emails.length === 0) return;
  await runPrepared(orm, RECORD_OUTCOMES, [
    o.at,
    o.recipients.map((r) => r.id),
    o.recipients.map((r) => r.state),
    o.recipients.map((r) => r.tried),
    o.events.map((e) => e.emailId),
    o.events.map((e) => e.organizationId),
    o.events.map((e) => e.type),
    o.events.map((e) => e.recipient),
    o.events.map((e) => e.bounceType),
    o.events.map((e) => e.detail),
    o.emails.map((e) => e.id),
    o.emails.map((e) => e.status),
    o.emails.map((e) => e.sent),
    o.emails.map((e) => e.retry?.reason ?? null),
    o.emails.map((e) => e.retry?.at ?? null),
    o.emails.map((e) => e.retry?.reply ?? null),
  ]);
}
