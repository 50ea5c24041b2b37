import type { Orm } from '../orm';
import type { SubscriptionState } from '../entities';
import { runPrepared, type PreparedStatement } from '../prepared';
import { contactColumns, contactMatch, subscriptionsJsonAfterWrite, type ContactRow } from './contact-row';
import { topicSubscribedTriggers, writeSubscriptions } from './subscription-writes';

export interface ChangeSubscriptionsRow {
  /** The contact exists in the organization. */
  contact_exists: boolean;
  /** Requested slugs that are no topic of the organization: then nothing was written. */
  unknown_topics: string[];
  /** The contact after the change; null when nothing was written. */
  contact: ContactRow | null;
  /**
   * Some change wrote no row: the topic was in that state already, maybe by a concurrent change
   * that committed while this statement waited on the contact's lock, which `contact` (read from
   * the statement's snapshot) would not show. The caller reads the contact again.
   */
  unwritten: boolean;
}

/**
 * Applies a contact's subscription changes all or nothing, in one statement: the contact row is
 * updated (and so locked) only when every slug names a topic of the organization; each explicit
 * row is written only when its state changes (source and changed_at then too), and each change to
 * `subscribed` records a `topic.subscribed` trigger: the rule of db/sql/subscription-writes.ts,
 * which the upsert's `topics` follow too. A topic deleted meanwhile fails the foreign
 * key: the statement, and so all of it, is rolled back.
 * $1 organization, $2 contact id or null, $3 email or null, $4 slugs, $5 states, $6 now.
 */
const CHANGE_SUBSCRIPTIONS: PreparedStatement = {
  name: 'change_subscriptions_v4',
  text: `
with wanted as (
  select u.slug, u.state, t.id as topic_id
    from unnest($4::text[], $5::text[]) as u(slug, state)
    left join topics t on t.organization_id = $1 and t.slug = u.slug
), c as (
  update contacts x set updated_at = $6
   where ${contactMatch('x', '$1', '$2', '$3')} and not exists (select 1 from wanted where topic_id is null)
  returning x.*
), written as (
  ${writeSubscriptions(`select c.id, w.topic_id, w.state, 'api', $6 from c cross join wanted w order by w.slug`)}
), triggers as (
  insert into automation_triggers (organization_id, type, contact_id, topic_id, created_at)
  ${topicSubscribedTriggers('$1', '$6')}
)
select exists (select 1 from contacts x where ${contactMatch('x', '$1', '$2', '$3')}) as contact_exists,
       (select count(*) from written) < (select count(*) from c cross join wanted) as unwritten,
       array(select slug from wanted where topic_id is null order by slug) as unknown_topics,
       (select row_to_json(r) from (
          select ${contactColumns('c')}, ${subscriptionsJsonAfterWrite('c.id', '$1', null)} as subscriptions from c
        ) r) as contact`,
};

export async function changeSubscriptions(
  orm: Orm,
  organizationId: string,
  ref: { id: string | null; email: string | null },
  changes: { slug: string; state: SubscriptionState }[],
  now: Date,
): Promise<ChangeSubscriptionsRow> {
  const [row] = await runPrepared<ChangeSubscriptionsRow>(orm, CHANGE_SUBSCRIPTIONS, [
    organizationId,
    ref.id,
    ref.email,
    changes.map((c) => c.slug),
    changes.map((c) => c.state),
    now,
  ]);
  return row;
}
