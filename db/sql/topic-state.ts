import type { SubscriptionState } from '../entities';

/**
 * A contact's state for a topic, written once: every statement that reads it (the contact
 * object's `subscriptions`, the preference page, an automation's topic condition, segment and
 * broadcast audiences, the send store) is built from these pieces, so all apply the same rule.
 *
 * The rule (spec, Contact and Topic): the effective state is the contact's explicit
 * subscription row for the topic when one exists, else the topic's `default_opt_in`
 * (`subscribed` when true, `unsubscribed` when false). A contact with no row follows the topic's
 * default as it changes.
 *
 * Two forms, one rule:
 * - `effectiveState` computes it from a topic row and its (outer-joined) explicit row, where each
 *   topic is read (`topicsWithRows`);
 * - `effectiveStateIs` tests it for one topic whose default the caller already knows (a segment's
 *   condition, a broadcast's topic): the default decides which explicit row to probe, so the test
 *   is one (anti-)semi-join on subscriptions_topic_idx (topic_id, state, contact_id), read from
 *   the index alone, with no join to topics.
 *
 * The send store's suppression asks something narrower, `leftTopic`: an explicit `unsubscribed`
 * row only (db/sql/store-emails.ts).
 */

/** The state a contact without an explicit row has, from the topic's `default_opt_in`. */
export const defaultState = (defaultOptIn: boolean): SubscriptionState => (defaultOptIn ? 'subscribed' : 'unsubscribed');

const otherState = (state: SubscriptionState): SubscriptionState => (state === 'subscribed' ? 'unsubscribed' : 'subscribed');

/**
 * The effective state as SQL: `defaultOptIn` is the topic's `default_opt_in` column, `explicit`
 * the explicit row's `state` (null without a row), both SQL expressions.
 */
export const effectiveState = (defaultOptIn: string, explicit: string) =>
  `coalesce(${explicit}, case when ${defaultOptIn} then 'subscribed' else 'unsubscribed' end)`;

/**
 * Each topic `t` with the explicit row `s` of the contact `contactId` (an SQL expression), null
 * without one: a `from` item for `effectiveState('t.default_opt_in', 's.state')`.
 */
export const topicsWithRows = (contactId: string) =>
  `topics t left join subscriptions s on s.topic_id = t.id and s.contact_id = ${contactId}`;

/**
 * Whether the contact `contactId` has an explicit row in `state` for the topic `topicId` (all SQL
 * expressions): an index-only probe of subscriptions_topic_idx.
 */
export const explicitRow = (topicId: string, state: string, contactId: string) =>
  `exists (select 1 from subscriptions s where s.topic_id = ${topicId} and s.state = ${state} and s.contact_id = ${contactId})`;

/**
 * The effective state is `state`, for a topic whose `default_opt_in` is known: which explicit row
 * decides, and whether its presence (or its absence) means `state`:
 *   effective subscribed,   default in:  no explicit `unsubscribed` row
 *   effective subscribed,   default out: an explicit `subscribed` row
 *   effective unsubscribed, default in:  an explicit `unsubscribed` row
 *   effective unsubscribed, default out: no explicit `subscribed` row
 */
export function effectiveStateIs(defaultOptIn: boolean, state: SubscriptionState): { row: SubscriptionState; present: boolean } {
  const byDefault = defaultState(defaultOptIn);
  return state === byDefault ? { row: otherState(byDefault), present: false } : { row: state, present: true };
}

/**
 * The send store's topic rule: the contact `contactId` has left the topic `topicId` by an explicit
 * `unsubscribed` row (the unsubscribe link, the subscriptions endpoint). A contact without a row is
 * not suppressed by it, whatever the topic's default.
 */
export const leftTopic = (topicId: string, contactId: string) => explicitRow(topicId, `'unsubscribed'`, contactId);
