import { CONTACT_FIELDS } from './contact-row';
import { EVENT_TYPES } from './email-events';

/**
 * Webhook payloads, written once: the PL/pgSQL functions that build every webhook event's body.
 * Events fan out by triggers, so every writer of an event (the store statement, the delivery
 * activities, contact statements, domain verification) adds the deliveries in its own transaction
 * and nothing is lost between an event and its POST; docs/webhooks.md shows each payload.
 *
 * - `svc_webhook_fanout(rows)`: one helper for every trigger, events in, deliveries out. `rows`
 *   holds (organization_id, type, payload json text, created_at) per event; an event is kept
 *   (webhook_events, its body as `json`, so its bytes and so its signature are the same on every
 *   retry) only when an enabled endpoint of its organization takes its type, with one delivery
 *   per such endpoint; the commit wakes every dispatcher (NOTIFY `svc_webhooks`).
 * - `email.<type>` (one per email_events row, db/sql/email-events.ts): the message as it was sent.
 * - `contact.created`, `contact.updated` (a change of a field the payload shows), `contact.deleted`:
 *   the contact's own fields (CONTACT_FIELDS, db/sql/contact-row.ts; as it was, when deleted).
 * - `domain.verified`: the moment a domain becomes verified.
 *
 * The tables and the triggers calling these functions are Migration20261126000000_webhooks's;
 * Migration20261208000000_webhook_payloads (re)creates the functions from this module
 * (`create or replace`). A migration runs once, so a change here needs a new migration that runs
 * WEBHOOK_FUNCTIONS again; test/db/rules-once.test.ts fails until the database holds this text.
 */

/** The audience and domain events, by the name their payload's `type` carries. */
const CONTACT_CREATED = 'contact.created';
const CONTACT_UPDATED = 'contact.updated';
const CONTACT_DELETED = 'contact.deleted';
const DOMAIN_VERIFIED = 'domain.verified';

/**
 * Every event a webhook can receive, as the functions name them: `email.<type>` for each message
 * event type (EVENT_TYPES, in the spec's order), then the audience and domain events.
 * core/webhooks/events.ts offers it to the API.
 */
export const WEBHOOK_EVENT_TYPES: readonly string[] = [
  ...EVENT_TYPES.map((t) => `email.${t}`),
  CONTACT_CREATED,
  CONTACT_UPDATED,
  CONTACT_DELETED,
  DOMAIN_VERIFIED,
];

/** A PL/pgSQL function of the fan-out: its name, its arguments and its body (the text between `$$`). */
export interface WebhookFunction {
  name: string;
  args: string;
  returns: 'void' | 'trigger';
  body: string;
}

/** A timestamp as the payloads show it: ISO 8601 in UTC with milliseconds (like JavaScript's toISOString). */
const iso = (col: string) => `to_char(${col} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

const FANOUT: WebhookFunction = {
  name: 'svc_webhook_fanout',
  args: 'rows jsonb',
  returns: 'void',
  body: `
begin
  with ev as (
    select nextval('webhook_events_id_seq') as id, x.organization_id, x.type, x.payload, x.created_at
      from jsonb_to_recordset(rows) as x(organization_id uuid, type text, payload text, created_at timestamptz)
     where exists (select 1 from webhook_endpoints w
                    where w.organization_id = x.organization_id and w.enabled and (w.events is null or x.type = any(w.events)))
  ), ins as (
    insert into webhook_events (id, organization_id, type, payload, created_at)
    select id, organization_id, type, payload::json, created_at from ev
  )
  insert into webhook_deliveries (organization_id, endpoint_id, event_id, event_type, next_attempt_at)
  select ev.organization_id, w.id, ev.id, ev.type, now()
    from ev join webhook_endpoints w
      on w.organization_id = ev.organization_id and w.enabled and (w.events is null or ev.type = any(w.events));
  if found then perform pg_notify('svc_webhooks', ''); end if;
end`,
};

/**
 * `email.<type>` for the email_events rows `n` (a statement's new rows) of the message `e`:
 * `email_id`, `from`, `to`, `subject`, `recipient`, `mode`, `kind`, `tags`, then `bounce_type`,
 * `detail` and `url` only when the event has them. Built as json text, so keys keep this order.
 */
const emailEventPayload = (
  n: string,
  e: string,
) => `json_build_object('type', 'email.' || ${n}.type, 'created_at', ${iso(`${n}.at`)}, 'data',
  (rtrim(json_build_object('email_id', ${e}.id, 'from', ${e}.from_address, 'to', ${e}.to_addresses, 'subject', ${e}.subject,
     'recipient', ${n}.recipient, 'mode', ${e}.mode, 'kind', ${e}.kind, 'tags', ${e}.tags, 'sequence', ${n}.id)::text, '}')
   || coalesce(', "bounce_type" : ' || to_json(${n}.bounce_type)::text, '')
   || coalesce(', "detail" : ' || to_json(${n}.detail)::text, '')
   || coalesce(', "url" : ' || to_json(${n}.url)::text, '') || '}')::json)`;

const EMAIL_EVENTS: WebhookFunction = {
  name: 'svc_webhook_email_events',
  args: '',
  returns: 'trigger',
  body: `
begin
  if not exists (select 1 from new_rows n join webhook_endpoints w on w.organization_id = n.organization_id and w.enabled) then
    return null;
  end if;
  perform svc_webhook_fanout((
    select jsonb_agg(jsonb_build_object('organization_id', n.organization_id, 'type', 'email.' || n.type, 'created_at', n.at,
             'payload', ${emailEventPayload('n', 'e')}::text)
           order by n.id)
      from new_rows n join emails e on e.id = n.email_id));
  return null;
end`,
};

/** A contact's webhook `data`: its own fields in CONTACT_FIELDS order, timestamps as `iso`. */
export const contactPayload = (r: string) =>
  `json_build_object(${CONTACT_FIELDS.map((f) => `'${f}', ${f.endsWith('_at') ? iso(`${r}.${f}`) : `${r}.${f}`}`).join(', ')})`;

/** The fields of CONTACT_FIELDS whose change is a `contact.updated` (all but the id and the timestamps). */
const CHANGED_FIELDS = CONTACT_FIELDS.filter((f) => f !== 'id' && !f.endsWith('_at'));
const changeable = (r: string) => CHANGED_FIELDS.map((f) => (f === 'properties' ? `${r}.${f}::jsonb` : `${r}.${f}`)).join(', ');

const contactEvents = (name: string, type: string, from: string, r: string): WebhookFunction => ({
  name,
  args: '',
  returns: 'trigger',
  body: `
begin
  if not exists (select 1 from ${from} join webhook_endpoints w on w.organization_id = ${r}.organization_id and w.enabled) then
    return null;
  end if;
  perform svc_webhook_fanout((
    select jsonb_agg(jsonb_build_object('organization_id', ${r}.organization_id, 'type', '${type}', 'created_at', now(),
             'payload', json_build_object('type', '${type}', 'created_at', ${iso('now()')}, 'data', ${contactPayload(r)})::text))
      from ${from}));
  return null;
end`,
});

const domainVerified = (name: string, from: string): WebhookFunction => ({
  name,
  args: '',
  returns: 'trigger',
  body: `
begin
  perform svc_webhook_fanout((
    select jsonb_agg(jsonb_build_object('organization_id', n.organization_id, 'type', '${DOMAIN_VERIFIED}', 'created_at', now(),
             'payload', json_build_object('type', '${DOMAIN_VERIFIED}', 'created_at', ${iso('now()')}, 'data',
               json_build_object('id', n.id, 'name', n.name, 'status', n.status))::text))
      from ${from}
     where n.status = 'verified' and n.deleted_at is null));
  return null;
end`,
});

/** Every function of the fan-out, the helper first (the triggers' functions call it). */
export const WEBHOOK_FUNCTIONS: readonly WebhookFunction[] = [
  FANOUT,
  EMAIL_EVENTS,
  contactEvents('svc_webhook_contacts_inserted', CONTACT_CREATED, 'new_rows n', 'n'),
  contactEvents(
    'svc_webhook_contacts_updated',
    CONTACT_UPDATED,
    `new_rows n join old_rows o on o.id = n.id and (${changeable('o')}) is distinct from (${changeable('n')})`,
    'n',
  ),
  contactEvents('svc_webhook_contacts_deleted', CONTACT_DELETED, 'old_rows o', 'o'),
  domainVerified('svc_webhook_domains_inserted', 'new_rows n'),
  domainVerified('svc_webhook_domains_updated', `new_rows n join old_rows o on o.id = n.id and o.status <> 'verified'`),
];

/** The statement (re)creating one function. */
export const createFunction = (f: WebhookFunction) =>
  `create or replace function ${f.name}(${f.args}) returns ${f.returns} language plpgsql as $$${f.body}$$;`;
