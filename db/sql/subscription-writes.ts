/**
 * How a contact's explicit subscription rows are written, and when a write fires `topic.subscribed`,
 * written once: both writers of subscriptions through the API (the upsert's `topics`,
 * db/sql/upsert-contacts.ts; the subscriptions endpoint and the `update_contact` step,
 * db/sql/change-subscriptions.ts) build their statement from these pieces, so both apply the same rule.
 *
 * The rule (issue 37; docs/audience.md):
 * - a row is written only when it changes: inserted (the contact had no explicit row for the
 *   topic) or its state changed; a row already in the wanted state is left alone (its
 *   `source` and `changed_at` kept), and is not returned;
 * - each returned row in state `subscribed` records one `topic.subscribed` trigger, in the same
 *   statement (it commits or rolls back with the change). So one trigger per topic and contact per
 *   change to `subscribed`, none for a contact whose row is already `subscribed`. A contact
 *   subscribed only by the topic's default opt-in has no row: subscribing it writes one, which fires.
 * - whatever the key's domain restriction: the specification holds a domain-restricted key back
 *   only from `contact.created` (Authentication 4), so a subscription fires `topic.subscribed`
 *   whichever key made it.
 * Only trigger rows for real changes are written: a repeat subscribe writes nothing at all.
 */

/**
 * The `written` CTE's body: upserts the explicit rows `rows` selects (a `select` of contact_id,
 * topic_id, state, source, changed_at, in key order so concurrent statements lock in one order),
 * returning contact_id, topic_id, state, source, changed_at of each row that changed.
 */
export const writeSubscriptions = (rows: string) => `insert into subscriptions as s (contact_id, topic_id, state, source, changed_at)
  ${rows}
  on conflict (contact_id, topic_id) do update set state = excluded.state, source = excluded.source, changed_at = excluded.changed_at
    where s.state <> excluded.state
  returning s.contact_id, s.topic_id, s.state, s.source, s.changed_at`;

/**
 * The `topic.subscribed` trigger rows (organization_id, type, contact_id, topic_id, created_at) for
 * the changes the CTE `written` (aliased `w`) returned, for `automation_triggers`. `organizationId`
 * and `now` are SQL expressions; `join` brings in what `organizationId` reads (the upsert's contacts).
 */
export const topicSubscribedTriggers = (organizationId: string, now: string, join = '') =>
  `select ${organizationId}, 'topic.subscribed', w.contact_id, w.topic_id, ${now} from written w ${join} where w.state = 'subscribed'`;
