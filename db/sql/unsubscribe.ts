import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';
import { eventType, insertEvents, UNSUBSCRIBED_ONCE } from './email-events';

export interface UnsubscribeRow {
  /** The topic the link named still exists: the recipient left that topic only. */
  topic_slug: string | null;
  topic_name: string | null;
  /** The organization still exists (otherwise nothing was written). */
  organization: string | null;
}

/**
 * One-click unsubscribe (RFC 8058), all in one statement:
 * - with a topic that still exists: the contact (created `subscribed` if absent) gets an
 *   explicit `unsubscribed` row for it, source `unsubscribe_link`;
 * - without one (or its topic was deleted since: the recipient asked to leave, so the wider
 *   choice is the safe one): the contact becomes `unsubscribed` (created so if absent); a
 *   `bounced` contact stays `bounced`;
 * - the message gets an `unsubscribed` event for the recipient once (UNSUBSCRIBED_ONCE,
 *   db/sql/email-events.ts): repeats and concurrent clicks write nothing. The
 *   message may be gone (retention): the change above is made all the same.
 * A contact created here records no `contact.created` automation trigger: it exists to hold an
 * opt-out, and must not start a welcome series. (The webhook `contact.created` fires as for any.)
 * $1 organization, $2 message, $3 topic or null, $4 address, $5 now, $6 id for a new contact.
 */
const UNSUBSCRIBE: PreparedStatement = {
  name: 'unsubscribe_v2',
  text: `
with o as (
  select id, name from organizations where id = $1
), t as (
  select t.id, t.slug, t.name from topics t join o on o.id = t.organization_id where t.id = $3
), c as (
  insert into contacts as x (id, organization_id, email, status, properties, created_at, updated_at)
  select $6, o.id, $4, case when exists (select 1 from t) then 'subscribed' else 'unsubscribed' end, '{}', $5, $5 from o
  on conflict (organization_id, email) do update
    set status = case when not exists (select 1 from t) and x.status = 'subscribed' then 'unsubscribed' else x.status end,
        updated_at = case when not exists (select 1 from t) and x.status = 'subscribed' then $5 else x.updated_at end
  returning x.id
), s as (
  insert into subscriptions as s (contact_id, topic_id, state, source, changed_at)
  select c.id, t.id, 'unsubscribed', 'unsubscribe_link', $5 from c cross join t
  on conflict (contact_id, topic_id) do update set state = 'unsubscribed', source = excluded.source, changed_at = excluded.changed_at
    where s.state <> 'unsubscribed'
), ev as (
  ${insertEvents(
    {
      emailId: 'e.id',
      organizationId: 'e.organization_id',
      type: eventType('unsubscribed'),
      recipient: '$4',
      at: '$5',
      detail: '(select slug from t)',
    },
    `from emails e join o on o.id = e.organization_id where e.id = $2
  ${UNSUBSCRIBED_ONCE}`,
  )}
)
select (select slug from t) as topic_slug, (select name from t) as topic_name, (select name from o) as organization`,
};

export async function unsubscribe(
  orm: Orm,
  p: { organizationId: string; emailId: string; topicId: string | null; address: string; now: Date; newContactId: string },
): Promise<UnsubscribeRow> {
  const [row] = await runPrepared<UnsubscribeRow>(orm, UNSUBSCRIBE, [
    p.organizationId,
    p.emailId,
    p.topicId,
    p.address,
    p.now,
    p.newContactId,
  ]);
  return row;
}
