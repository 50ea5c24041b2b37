import type { EntityManager } from '@mikro-orm/postgresql';
import { EmailEvent, type EventType } from '../entities';

export { EVENT_TYPES, type EventType } from '../entities';

/**
 * How a message event row is written, once: every writer of `email_events` builds its insert
 * from here, the statements with `insertEvents` (the send store, db/sql/store-emails.ts; a
 * delivery pass's outcomes, db/sql/delivery-pass.ts; opens and clicks, db/sql/record-engagement.ts;
 * the unsubscribe link, db/sql/unsubscribe.ts) and the ORM writer with `persistEvent` (returned
 * mail, core/bounces/apply.ts).
 *
 * A row is one thing that happened to one recipient of one message:
 * - `email_id`, `organization_id` (the message's, so its webhooks go to its organization),
 *   `type` (one of EVENT_TYPES), `recipient` (the address), `at` (when it happened);
 * - `bounce_type` (`hard`, `soft`, `undetermined`; bounces only), `detail` (a reply, a reason,
 *   `machine` for an automated open), `url` (a click's target): null unless the event has them;
 * - `id` is the table's sequence and is the order of a message's events (GET /emails/:id lists
 *   them by it), so a statement writing several inserts them in the order they happened (its
 *   `order by`).
 * Each insert fires the webhook fan-out trigger: one `email.<type>` webhook event per row, its
 * payload built by svc_webhook_email_events (db/sql/webhook-payloads.ts). An `unsubscribed`
 * event is written once per message and recipient (`UNSUBSCRIBED_ONCE`).
 */

/** An event row's values, each an SQL expression; a column not given is left out of the insert (null). */
export interface EventValues {
  emailId: string;
  organizationId: string;
  type: string;
  recipient: string;
  at: string;
  bounceType?: string;
  detail?: string;
  url?: string;
}

const COLUMNS: [keyof EventValues, string][] = [
  ['emailId', 'email_id'],
  ['organizationId', 'organization_id'],
  ['type', 'type'],
  ['recipient', 'recipient'],
  ['at', 'at'],
  ['bounceType', 'bounce_type'],
  ['detail', 'detail'],
  ['url', 'url'],
];

/** An event type as an SQL literal, checked against EVENT_TYPES. */
export const eventType = (type: EventType) => `'${type}'`;

/**
 * `insert into email_events (...) select <values> <rest>`: `rest` is the rest of the statement,
 * from its `from` on (and its `order by`, `on conflict` or `returning`).
 */
export function insertEvents(values: EventValues, rest: string): string {
  const columns = COLUMNS.filter(([key]) => values[key] !== undefined);
  return `insert into email_events (${columns.map(([, column]) => column).join(', ')})
  select ${columns.map(([key]) => values[key]).join(', ')}
  ${rest}`;
}

/**
 * The `on conflict` clause of an insert of `unsubscribed` events: the partial unique index
 * email_events_unsubscribed_once makes a repeat (a second click, concurrent ones) write nothing.
 */
export const UNSUBSCRIBED_ONCE = `on conflict (email_id, recipient) where type = 'unsubscribed' do nothing`;

/** An event row's values, for a writer on an EntityManager's unit of work. */
export interface NewEvent {
  emailId: string;
  organizationId: string;
  type: EventType;
  recipient: string;
  at: Date;
  bounceType?: EmailEvent['bounceType'];
  detail?: string | null;
  url?: string | null;
}

/** Adds one event row to `em`'s unit of work; it is inserted (and fans out) at the caller's flush. */
export function persistEvent(em: EntityManager, e: NewEvent): EmailEvent {
  const event = Object.assign(new EmailEvent(), {
    emailId: e.emailId,
    organizationId: e.organizationId,
    type: e.type,
    recipient: e.recipient,
    at: e.at,
    bounceType: e.bounceType ?? null,
    detail: e.detail ?? null,
    url: e.url ?? null,
  });
  em.persist(event);
  return event;
}
