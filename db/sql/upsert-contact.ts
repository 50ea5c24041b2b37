import type { Orm } from '../orm';
import type { ContactStatus, PropertyValue } from '../entities';
import { runPrepared, type PreparedStatement } from '../prepared';
import { contactColumns, subscriptionsJsonAfterWrite, type ContactRow } from './contact-row';

export interface UpsertContactInput {
  /** Used only when the contact is new. */
  newId: string;
  organizationId: string;
  /** Lower-cased and trimmed. */
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
  /** Record a `contact.created` trigger when the contact is new (not for domain-restricted keys). */
  fireCreated: boolean;
  now: Date;
}

export interface UpsertContactRow extends ContactRow {
  created: boolean;
  /** How many of the requested topics this statement saw; fewer only when one was created concurrently. */
  topics_applied: number;
}

/**
 * Upserts a contact, its topic subscriptions and the automation triggers they fire, in one
 * statement (so all of it or none of it is written):
 * - the contact: insert, or on the (organization_id, email) conflict update in place; properties
 *   merge here (`||`, then `-` for keys set to null), so concurrent upserts with different keys
 *   keep both, and the 100-key ceiling is the table's CHECK constraint on the merged object;
 *   `xmax = 0` tells an insert from an update;
 * - missing topics are created (name = slug, default opt-in on); existing ones are read;
 * - an explicit `subscribed` row per topic; a row already subscribed is left alone, so only real
 *   changes are returned and fire `topic.subscribed`;
 * - `contact.created` when the row was inserted and $13 allows it.
 * A topic another transaction creates at the same moment is neither inserted (conflict) nor in
 * this statement's snapshot: `topics_applied` then falls short and the caller runs it again.
 *
 * $1 new id, $2 organization, $3 email, $4 first name, $5 set it, $6 last name, $7 set it,
 * $8 status or null, $9 properties to merge, $10 keys to remove, $11 topic ids, $12 topic slugs,
 * $13 fire contact.created, $14 now.
 */
const UPSERT_CONTACT: PreparedStatement = {
  name: 'upsert_contact_v1',
  text: `
with c as (
  insert into contacts as x (id, organization_id, email, first_name, last_name, status, properties, created_at, updated_at)
  values ($1, $2, $3, $4, $6, coalesce($8, 'subscribed'), $9::jsonb, $14, $14)
  on conflict (organization_id, email) do update set
    first_name = case when $5::boolean then excluded.first_name else x.first_name end,
    last_name = case when $7::boolean then excluded.last_name else x.last_name end,
    status = coalesce($8, x.status),
    properties = (x.properties || $9::jsonb) - $10::text[],
    updated_at = $14
  returning x.*, (x.xmax = 0) as created
), topics_new as (
  insert into topics (id, organization_id, slug, name, default_opt_in, created_at)
  select u.id, $2, u.slug, u.slug, true, $14 from unnest($11::uuid[], $12::text[]) as u(id, slug)
  on conflict (organization_id, slug) do nothing
  returning id, slug, default_opt_in
), topics_written as (
  select id, slug, default_opt_in from topics_new
  union all
  select id, slug, default_opt_in from topics where organization_id = $2 and slug = any($12::text[])
), written as (
  insert into subscriptions as s (contact_id, topic_id, state, source, changed_at)
  select c.id, t.id, 'subscribed', 'api', $14 from c cross join topics_written t order by t.slug
  on conflict (contact_id, topic_id) do update set state = 'subscribed', source = 'api', changed_at = $14
    where s.state <> 'subscribed'
  returning s.topic_id, s.state, s.source, s.changed_at
), triggers as (
  insert into automation_triggers (organization_id, type, contact_id, topic_id, created_at)
  select $2, 'contact.created', c.id, null, $14 from c where c.created and $13::boolean
  union all
  select $2, 'topic.subscribed', c.id, w.topic_id, $14 from c cross join written w
)
select ${contactColumns('c')}, c.created, (select count(*)::int from topics_written) as topics_applied,
       ${subscriptionsJsonAfterWrite('c.id', '$2', 'topics_written')} as subscriptions
  from c`,
};

export async function upsertContact(orm: Orm, i: UpsertContactInput): Promise<UpsertContactRow> {
  const [row] = await runPrepared<UpsertContactRow>(orm, UPSERT_CONTACT, [
    i.newId,
    i.organizationId,
    i.email,
    i.firstName ?? null,
    i.firstName !== undefined,
    i.lastName ?? null,
    i.lastName !== undefined,
    i.status ?? null,
    JSON.stringify(i.set),
    i.remove,
    i.topics.map((t) => t.id),
    i.topics.map((t) => t.slug),
    i.fireCreated,
    i.now,
  ]);
  return row;
}
