import type { ContactStatus, SubscriptionState } from '../entities';

/**
 * A condition on contacts with its topic already resolved (core/segments/filter.ts turns a
 * segment's or a list's filter into these). A topic condition whose topic no longer exists has
 * `topicId` null and matches no contact: mail is never aimed by a topic that is gone.
 */
export type AudienceCondition = { status: ContactStatus } | { topicId: string | null; defaultOptIn: boolean; state: SubscriptionState };

/**
 * SQL for conditions on the contact row `c`, each parameter pushed to `params` (knex `?` style).
 * A topic condition is on the effective state: the explicit row when there is one, else the
 * topic's default. So each is one (anti-)semi-join probing subscriptions_topic_idx
 * (topic_id, state, contact_id) from the index alone:
 *   effective subscribed,   default in:  no explicit `unsubscribed` row
 *   effective subscribed,   default out: an explicit `subscribed` row
 *   effective unsubscribed, default in:  an explicit `unsubscribed` row
 *   effective unsubscribed, default out: no explicit `subscribed` row
 */
export function audienceConditions(conditions: AudienceCondition[], params: unknown[]): string[] {
  return conditions.map((cond) => {
    if ('status' in cond) {
      params.push(cond.status);
      return 'c.status = ?';
    }
    if (cond.topicId === null) return 'false';
    const defaultState: SubscriptionState = cond.defaultOptIn ? 'subscribed' : 'unsubscribed';
    // The explicit state whose presence (or absence) decides.
    const other: SubscriptionState = defaultState === 'subscribed' ? 'unsubscribed' : 'subscribed';
    params.push(cond.topicId, other);
    const probe = 'exists (select 1 from subscriptions s where s.topic_id = ? and s.state = ? and s.contact_id = c.id)';
    return cond.state === defaultState ? `not ${probe}` : probe;
  });
}
