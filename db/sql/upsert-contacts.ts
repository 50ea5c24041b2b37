import type { Orm } from '../orm';
import type { ContactStatus, PropertyValue } from '../entities';
import { runPrepared, type PreparedStatement } from '../prepared';
import { contactColumns, subscriptionsJsonAfterWrite, type ContactRow } from './contact-row';
import { requestsByToken } from './rate-window';
import { topicSubscribedTriggers, writeSubscriptions } from './subscription-writes';

/** One upsert request of a group. */
export interface UpsertRequest {
  /** The SHA-256 of the caller's token: the statement authenticates it and charges one request. */
  tokenHash: string;
  /** Used only when the contact is new. */
  newId: string;
  /** Lower-cased and trimmed; unique within a group (two changes of one row cannot share a statement). */
  email: string;
  /** undefined: unchanged (null clears). */
  firstName?: string | null;
  lastName?: string | null;
  status?: ContactStatus;
  /** Merged into the stored properties. */
  set: Record<string, PropertyValue>;
  /** Keys removed from the stored properties. */
  remove: string[];
  /** Topics to subscribe to, each with the id it gets when it does not exist yet; sorted by slug. */
  topics: { id: string; slug: string }[];
}

/** The key's verdict on one request, and the contact when the key could write it (its columns null otherwise). */
export type UpsertContactRow = {
  req: number;
  /** The token names a live key. */
  known: boolean;
  /** The key's rate window had room for this request. */
  admitted: boolean;
  mode: 'live' | 'test' | null;
  rate_limit: number | null;
  created: boolean | null;
  /** How many of the request's topics this statement saw; fewer only when one was created concurrently. */
  topics_applied: number;
} & { [K in keyof ContactRow]: ContactRow[K] | null };

/**
 * Authenticates a group of upsert requests, charges their keys, and upserts their contacts with
 * topic subscriptions and the automation triggers those fire, in one statement and one commit
 * (core/contacts/group-upsert.ts groups them; all of a statement or none of it is written):
 * - keys: found by token (key-for-token.ts), each charged one per request in one upsert of its
 *   window, requests admitted in order over the running count (rate-window.ts, as the send
 *   store does). Only admitted requests of live keys write (`ok`); every verdict is answered.
 * - contacts: insert, or on the (organization_id, email) conflict update in place from the
 *   request's own row (`ok`, matched by organization and email, unique in a group). Properties
 *   merge here (`||`, then `-` for keys set to null), so concurrent upserts with different keys
 *   keep both, and the 100-key ceiling is the table's CHECK constraint on the merged object.
 *   `xmax = 0` tells an insert from an update.
 * - topics: missing ones created (name = slug, default opt-in on), existing ones read.
 * - an explicit `subscribed` row per topic; a row already subscribed is left alone, so only real
 *   changes are returned and fire `topic.subscribed`, by the rule the subscriptions endpoint
 *   follows (db/sql/subscription-writes.ts: whatever the key's domain restriction); trigger rows
 *   are written for those changes only. `contact.created` when the contact row was inserted,
 *   unless the key is domain-restricted (spec: Authentication 4).
 * A topic another transaction creates at the same moment is neither inserted (conflict) nor in
 * this statement's snapshot: the request's `topics_applied` then falls short and the caller runs
 * it again. Rows are written in key order (contacts by organization and email, subscriptions by
 * contact and topic), so concurrent statements lock in one order.
 *
 * $1 requests (JSON array), $2 now.
 */
const UPSERT_CONTACTS: PreparedStatement = {
  name: 'upsert_contacts_v2',
  text: `
with q as (
  select * from jsonb_to_recordset($1::jsonb) as x(
    req int, token_hash text, new_id uuid, email text, first_name text, set_first boolean, last_name text, set_last boolean,
    status text, props jsonb, remove text[], topic_ids uuid[], topic_slugs text[])
), ${requestsByToken('q')}, ok as (
  select q.*, p.organization_id, p.domain_ids from p join q on q.req = p.req where p.admitted and p.mode = 'live'
), c as (
  insert into contacts as x (id, organization_id, email, first_name, last_name, status, properties, created_at, updated_at)
  select ok.new_id, ok.organization_id, ok.email, ok.first_name, ok.last_name, coalesce(ok.status, 'subscribed'), ok.props, $2, $2
    from ok order by ok.organization_id, ok.email
  on conflict (organization_id, email) do update set (first_name, last_name, status, properties, updated_at) = (
    select case when o.set_first then o.first_name else x.first_name end,
           case when o.set_last then o.last_name else x.last_name end,
           coalesce(o.status, x.status), (x.properties || o.props) - o.remove, $2
      from ok o where o.organization_id = x.organization_id and o.email = x.email)
  returning x.*, (x.xmax = 0) as created
), cr as (
  select c.*, ok.req, ok.domain_ids from c join ok on ok.organization_id = c.organization_id and ok.email = c.email
), wanted as (
  select ok.req, ok.organization_id, u.id, u.slug from ok cross join unnest(ok.topic_ids, ok.topic_slugs) as u(id, slug)
), topics_new as (
  insert into topics (id, organization_id, slug, name, default_opt_in, created_at)
  select distinct on (organization_id, slug) id, organization_id, slug, slug, true, $2 from wanted order by organization_id, slug, id
  on conflict (organization_id, slug) do nothing
  returning id, organization_id, slug, default_opt_in
), topics_written as (
  select w.req, t.id, t.organization_id, t.slug, t.default_opt_in
    from wanted w join (
      select id, organization_id, slug, default_opt_in from topics_new
      union all
      select t.id, t.organization_id, t.slug, t.default_opt_in from topics t
       where (t.organization_id, t.slug) in (select organization_id, slug from wanted)
    ) t on t.organization_id = w.organization_id and t.slug = w.slug
), written as (
  ${writeSubscriptions(`select cr.id, t.id, 'subscribed', 'api', $2 from cr join topics_written t on t.req = cr.req order by cr.id, t.id`)}
), triggers as (
  insert into automation_triggers (organization_id, type, contact_id, topic_id, created_at)
  select cr.organization_id, 'contact.created', cr.id, null, $2 from cr where cr.created and cr.domain_ids is null
  union all
  ${topicSubscribedTriggers('cr.organization_id', '$2', 'join cr on cr.id = w.contact_id')}
)
select q.req, p.id is not null as known, coalesce(p.admitted, false) as admitted, p.mode, p.rate_limit,
       ${contactColumns('cr')}, cr.created, (select count(*)::int from topics_written t where t.req = q.req) as topics_applied,
       case when cr.id is not null then ${subscriptionsJsonAfterWrite('cr.id', 'cr.organization_id', 'topics_written')} end as subscriptions
  from q left join p on p.req = q.req left join cr on cr.req = q.req
 order by q.req`,
};

export async function upsertContacts(orm: Orm, requests: UpsertRequest[], now: Date): Promise<UpsertContactRow[]> {
  return runPrepared<UpsertContactRow>(orm, UPSERT_CONTACTS, [
    JSON.stringify(
      requests.map((r, req) => ({
        req,
        token_hash: r.tokenHash,
        new_id: r.newId,
        email: r.email,
        first_name: r.firstName ?? null,
        set_first: r.firstName !== undefined,
        last_name: r.lastName ?? null,
        set_last: r.lastName !== undefined,
        status: r.status ?? null,
        props: r.set,
        remove: r.remove,
        topic_ids: r.topics.map((t) => t.id),
        topic_slugs: r.topics.map((t) => t.slug),
      })),
    ),
    now,
  ]);
}
