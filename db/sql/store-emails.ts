import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';
import { keyForToken } from './key-for-token';
import { admits, capOf, chargeWindows } from './rate-window';
import { leftTopic } from './topic-state';
import { eventType, insertEvents } from './email-events';

/** One request's fate in a store statement. */
export interface StoredRequest {
  req: number;
  /** The token names a live key. */
  known: boolean;
  /** The key's rate window had room for this request. */
  admitted: boolean;
  rate_limit: number | null;
  organization_id: string | null;
}

/** What the store statement answers: each request, each message it stored, each message it refused. */
export interface StoreResult {
  requests: StoredRequest[];
  stored: { id: string; status: 'queued' | 'suppressed'; suppressed: string[] }[];
  refused: { id: string; code: 'template_changed' | 'domain_not_verified' | 'stream_mismatch' | 'unknown_topic' | 'tracking_host' }[];
}

/**
 * Authenticates a group of send requests, charges their keys and stores their messages, in one
 * statement and one commit (see core/emails/group-store.ts). Parameters, each a JSON array:
 * $1 requests {req, token_hash, cost, prepaid}, $2 messages (each with its request's
 * `req`), $3 recipients, $4 attachments. A message may leave out a field at its default (empty
 * cc, bcc, headers and tags, false tracking and `template_latest`, the rest null): a missing
 * field reads as null, and the statement stores the default.
 *
 * Keys and rates (spec, Limits; the rule itself is in rate-window.ts):
 * - A key is found by its token (key-for-token.ts). Unknown tokens store nothing.
 * - Each key's window is charged the requests' costs in one upsert; PostgreSQL serializes
 *   concurrent upserts of a key, so `used` before this statement is exact, and so is admission,
 *   in request order. A `prepaid` request (a batch, which reserved its cost before its body was
 *   read) is charged nothing here and admitted.
 *
 * Messages (of admitted requests only):
 * - A message rendered from a template (`template_id`, `template_version`) is stored only if the
 *   template is still in the organization and, when the version was resolved as the latest
 *   (`template_latest`), still has no later one, or its idempotency key is taken (a replay);
 *   otherwise it is refused `template_changed`
 *   and the caller renders it again (core/templates/resolver.ts remembers resolutions, so this
 *   check is what keeps them exact).
 * - The sender domain must be a verified, undeleted domain of the key's organization that the key
 *   may use; bulk kinds need a bulk-stream domain; a `topic` must name a topic of the
 *   organization; tracking needs the domain's tracking host with its CNAME verified. Other
 *   messages are refused, each on its own.
 * - A recipient is suppressed when its organization's suppression list holds the address, and,
 *   for bulk kinds only, when its contact is `unsubscribed` or `bounced` or has left the
 *   message's topic (an explicit `unsubscribed` row: `leftTopic`, topic-state.ts): the event's
 *   detail then says which (`unsubscribed`, `bounced`). A message whose every recipient is
 *   suppressed is stored as `suppressed` and never queued (enqueued_at is set).
 * - A message whose idempotency key its organization already used is skipped (`do nothing`,
 *   after waiting for a concurrent holder to commit); the caller answers it as a replay. Its
 *   recipients, events and attachments are skipped with it: each child insert joins the rows
 *   the message insert returned.
 * - Events are inserted in recipient order, so their ids (the API's event order) follow it.
 *
 * The parameters are read as json, not jsonb: each is read once, and converting it to jsonb's
 * binary form first cost more than the one parse (measured, 250 messages a statement: 7 µs less
 * per message as json).
 *
 * The column lists mirror the entities in db/entities (Email, Recipient, EmailEvent, Attachment;
 * an event row as db/sql/email-events.ts writes it): GET /emails/:id and the SendEmail activities
 * read what this stores through those entities, so the API and delivery tests cover the mapping.
 */
const STORE_EMAILS_SQL = `
with q as (
  select * from json_to_recordset($1::json) as x(req int, token_hash text, key_id uuid, cost int, prepaid boolean)
), k as (
  select q.req, q.cost, q.prepaid, a.id, a.organization_id, a.mode, a.domain_ids, ${capOf('a.rate_limit')} as cap
    from q cross join lateral (
      select a.* from ${keyForToken('q.token_hash')}
      union all
      -- A broadcast's fan-out names the key that created it (authorized then; a revocation since
      -- does not stop it, cancel does).
      select a.* from api_keys a where q.token_hash is null and a.id = q.key_id
    ) a
), kc as (
  select id, sum(cost)::int as n from k group by id
), charged as (
  -- A key whose requests cost nothing here (a batch that reserved its cost) is not written.
  ${chargeWindows('select id as api_key_id, n as used from kc where n > 0')}
), upto as (
  select k.*, coalesce(c.used, 0) - kc.n + sum(k.cost) over (partition by k.id order by k.req) as used_after
    from k join kc on kc.id = k.id left join charged c on c.api_key_id = k.id
), p as (
  -- Single sends only (a batch reserved before its body was read, so it comes prepaid).
  select upto.*, (prepaid or ${admits('(used_after - cost)', 'cost', 'cap', 'false')}) as admitted from upto
), m as (
  select x.*, p.organization_id as org, p.id as api_key, p.mode, d.id as domain_id, d.name as domain_name, d.stream, tv.template_ok,
         tp.id as topic_id,
         case when not tv.template_ok then 'template_changed'
              when d.id is null then 'domain_not_verified'
              when x.bulk and d.stream <> 'bulk' then 'stream_mismatch'
              when (x.topic is not null or x.given_topic_id is not null) and tp.id is null then 'unknown_topic'
              when (x.track_opens or x.track_clicks) and not d.tracking_ok then 'tracking_host'
         end as refusal
    from json_to_recordset($2::json) as x(
      req int, id uuid, pos int, at timestamptz, from_domain text, bulk boolean, from_address text, to_addresses jsonb,
      cc_addresses jsonb, bcc_addresses jsonb, reply_to text, subject text, html text, text text, headers jsonb, tags jsonb,
      kind text, topic text, given_topic_id uuid, track_opens boolean, track_clicks boolean, scheduled_at timestamptz, idempotency_key text,
      template_id uuid, template_version int, template_latest boolean, source text, broadcast_id uuid)
    join p on p.req = x.req and p.admitted
    cross join lateral (
      -- Versions go only with their template, so the template row alone answers both questions.
      -- A message whose idempotency key is taken passes: the insert skips it and it is answered
      -- as a replay, whatever became of its template since the first attempt.
      select x.template_id is null
          or exists (select 1 from templates t
                      where t.id = x.template_id and t.organization_id = p.organization_id
                        and (not coalesce(x.template_latest, false) or t.latest_version = x.template_version))
          or (x.idempotency_key is not null
              and exists (select 1 from emails e where e.organization_id = p.organization_id and e.idempotency_key = x.idempotency_key))
          as template_ok
    ) tv
    left join lateral (
      select d.id, d.name, d.stream,
             d.tracking_host is not null and exists (
               select 1 from jsonb_array_elements(d.records) rec
                where rec->>'purpose' = 'tracking' and rec->>'status' = 'verified' and rec->>'name' = d.tracking_host) as tracking_ok
        from domains d
       where d.organization_id = p.organization_id and lower(d.name) = x.from_domain and d.status = 'verified'
         and d.deleted_at is null and (p.domain_ids is null or p.domain_ids @> jsonb_build_array(d.id::text))
       limit 1
    ) d on true
    left join topics tp on tp.organization_id = p.organization_id
          and (tp.slug = x.topic or (x.topic is null and tp.id = x.given_topic_id))
), ok as (
  select * from m where refusal is null
), r as (
  select x.*, ok.org, ok.at, dr.reason is not null as suppressed, dr.reason
    from json_to_recordset($3::json) as x(id uuid, email_id uuid, pos int, address text, field text)
    join ok on ok.id = x.email_id
    cross join lateral (
      select case
        when exists (select 1 from suppressions s where s.organization_id = ok.org and s.email = x.address) then 'list'
        when ok.bulk then (
          select case when c.status <> 'subscribed' then c.status
                      when ok.topic_id is not null and ${leftTopic('ok.topic_id', 'c.id')} then 'unsubscribed' end
            from contacts c where c.organization_id = ok.org and c.email = x.address)
      end as reason
      -- Not flattened: inlined, the lookups ran once for each use of the reason (twice).
      offset 0
    ) dr
), ra as (
  select email_id, bool_and(suppressed) as all_suppressed,
         coalesce(json_agg(address order by pos) filter (where suppressed), '[]') as suppressed_addresses
    from r group by email_id
), e as (
  insert into emails (id, organization_id, api_key_id, domain_id, from_address, to_addresses, cc_addresses, bcc_addresses,
                      reply_to, subject, html, text, headers, tags, kind, mode, status, scheduled_at, message_id,
                      idempotency_key, enqueued_at, created_at, updated_at, template_id, template_version, source, stream,
                      topic_id, track_opens, track_clicks, broadcast_id)
  select ok.id, ok.org, ok.api_key, ok.domain_id, ok.from_address, ok.to_addresses, coalesce(ok.cc_addresses, '[]'), coalesce(ok.bcc_addresses, '[]'),
         ok.reply_to, ok.subject, ok.html, ok.text, coalesce(ok.headers, '{}'), coalesce(ok.tags, '[]'), ok.kind, ok.mode,
         case when a.all_suppressed then 'suppressed' else 'queued' end, ok.scheduled_at, '<' || ok.id || '@' || ok.domain_name || '>',
         ok.idempotency_key, case when a.all_suppressed then ok.at end, ok.at, ok.at, ok.template_id, ok.template_version, ok.source,
         ok.stream, ok.topic_id, coalesce(ok.track_opens, false), coalesce(ok.track_clicks, false),
         ok.broadcast_id
    from ok
    join ra a on a.email_id = ok.id
   order by ok.pos
  on conflict (organization_id, idempotency_key) where idempotency_key is not null do nothing
  returning id, status
), rec as (
  insert into recipients (id, email_id, address, field, state, attempts, updated_at)
  select r.id, r.email_id, r.address, r.field, case when r.suppressed then 'suppressed' else 'pending' end, 0, r.at
    from r join e on e.id = r.email_id
), ev as (
  ${insertEvents(
    {
      emailId: 'r.email_id',
      organizationId: 'r.org',
      type: `case when r.suppressed then ${eventType('suppressed')} else ${eventType('queued')} end`,
      recipient: 'r.address',
      at: 'r.at',
      detail: `case when r.reason in ('unsubscribed', 'bounced') then r.reason end`,
    },
    'from r join e on e.id = r.email_id order by r.pos',
  )}
), att as (
  insert into attachments (id, email_id, position, filename, content_type, size, content)
  select x.id, x.email_id, x.position, x.filename, x.content_type, x.size, decode(x.content, 'base64')
    from json_to_recordset($4::json) as x(id uuid, email_id uuid, position int, filename text, content_type text, size int, content text)
    join e on e.id = x.email_id
)
select coalesce((select json_agg(json_build_object('req', q.req, 'known', p.req is not null, 'admitted', coalesce(p.admitted, false),
                   'rate_limit', p.cap, 'organization_id', p.organization_id))
                   from q left join p on p.req = q.req), '[]') as requests,
       coalesce((select json_agg(json_build_object('id', e.id, 'status', e.status, 'suppressed',
                   ra.suppressed_addresses))
                   from e join ra on ra.email_id = e.id), '[]') as stored,
       coalesce((select json_agg(json_build_object('id', m.id, 'code', m.refusal)) from m where m.refusal is not null), '[]') as refused`;

const STORE_EMAILS: PreparedStatement = { name: 'store_emails_v16', text: STORE_EMAILS_SQL };

/**
 * Large groups (a broadcast's chunks, big group commits) plan without nested loops: the
 * statement joins its own rows (messages, recipients, what it inserted), and PostgreSQL, which
 * cannot know how many rows a JSON parameter holds, plans nested loops over them whose cost grows
 * with the square of the group (1,000 messages: ~900 ms, most of it in three such loops). Small
 * groups keep the default: there nested loops are the cheap plan, and disabling them tripled the
 * cost of a single send (measured: batch acceptance 9,918 → 2,996 messages/s). A separate name,
 * because a connection's cached plan does not follow a changed setting.
 */
const STORE_EMAILS_LARGE: PreparedStatement = {
  name: 'store_emails_large_v3',
  text: STORE_EMAILS_SQL,
  settings: ['enable_nestloop = off'],
};
const LARGE_GROUP = 200;

/** A row for one of the statement's JSON arrays, columns named as in the statement. */
export type StoreRow<Key extends string> = Record<Key, string> & Record<string, unknown>;

export interface StoreParams {
  requests: { req: number; token_hash: string | null; key_id: string | null; cost: number; prepaid: boolean }[];
  emails: StoreRow<'id'>[];
  recipients: StoreRow<'email_id'>[];
  attachments: StoreRow<'email_id'>[];
}

export async function storeEmails(orm: Orm, p: StoreParams): Promise<StoreResult> {
  const [row] = await runPrepared<StoreResult>(orm, p.emails.length >= LARGE_GROUP ? STORE_EMAILS_LARGE : STORE_EMAILS, [
    JSON.stringify(p.requests),
    JSON.stringify(p.emails),
    JSON.stringify(p.recipients),
    JSON.stringify(p.attachments),
  ]);
  return row;
}
