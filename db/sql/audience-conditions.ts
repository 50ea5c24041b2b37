import type { ContactStatus, SubscriptionState } from '../entities';
import { effectiveStateIs, explicitRow } from './topic-state';

/**
 * A condition on contacts with its topic already resolved (core/segments/filter.ts turns a
 * segment's or a list's filter into these). A topic condition whose topic no longer exists has
 * `topicId` null and matches no contact: mail is never aimed by a topic that is gone.
 */
export type AudienceCondition = { status: ContactStatus } | { topicId: string | null; defaultOptIn: boolean; state: SubscriptionState };

/**
 * SQL for conditions on the contact row `c`, each parameter pushed to `params` (knex `?` style).
 * A topic condition is on the effective state (db/sql/topic-state.ts), tested as one
 * (anti-)semi-join probing subscriptions_topic_idx (topic_id, state, contact_id) from the index
 * alone: the topic's default decides which explicit row to probe (`effectiveStateIs`).
 */
export function audienceConditions(conditions: AudienceCondition[], params: unknown[]): string[] {
  return conditions.map((cond) => {
    if ('status' in cond) {
      params.push(cond.status);
      return 'c.status = ?';
    }
    if (cond.topicId === null) return 'false';
    const { row, present } = effectiveStateIs(cond.defaultOptIn, cond.state);
    params.push(cond.topicId, row);
    const probe = explicitRow('?', '?', 'c.id');
    return present ? probe : `not ${probe}`;
  });
}
