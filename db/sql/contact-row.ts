import type { ContactStatus, PropertyValue, SubscriptionState } from '../entities';
import { effectiveState, topicsWithRows } from './topic-state';
import type { PgTimestamp } from './pg-types';

/** A subscription as the contact object shows it: the effective state, explicit or by the topic's default. */
export interface SubscriptionView {
  topic: string;
  state: SubscriptionState;
  explicit: boolean;
  /** PostgreSQL's JSON rendering of a timestamptz; null without an explicit row. */
  changed_at: PgTimestamp | null;
  source: string | null;
}

/** A contact with its subscriptions, as every contact statement returns it. */
export interface ContactRow {
  id: string;
  email: string;
  first_name: string | null;
  last_name: string | null;
  status: ContactStatus;
  properties: Record<string, PropertyValue>;
  created_at: PgTimestamp;
  updated_at: PgTimestamp;
  subscriptions: SubscriptionView[];
}

/**
 * A contact's own fields, in the order every contact shape shows them: the rows of the statements
 * here (then the API adds `object` and `subscriptions`, api/contacts/present.ts) and the `data` of
 * the contact webhooks (db/sql/webhook-payloads.ts).
 */
export const CONTACT_FIELDS = ['id', 'email', 'first_name', 'last_name', 'status', 'properties', 'created_at', 'updated_at'] as const;

/** The contact columns, from a row or CTE named `alias`. */
export const contactColumns = (alias: string) => CONTACT_FIELDS.map((c) => `${alias}.${c}`).join(', ');

/**
 * One subscription entry per topic row `t` with its explicit row `s` (null without one), as JSON;
 * the state is the effective one (db/sql/topic-state.ts).
 */
const entry = (t: string, s: string) => `json_build_object(
    'topic', ${t}.slug,
    'state', ${effectiveState(`${t}.default_opt_in`, `${s}.state`)},
    'explicit', ${s}.state is not null,
    'changed_at', ${s}.changed_at,
    'source', ${s}.source)`;

/**
 * The contact's subscriptions (spec: one entry per topic of the organization, in slug order) as a
 * JSON array, for the contact whose id is `contactId` in the organization `organizationId`.
 */
export const subscriptionsJson = (contactId: string, organizationId: string) => `coalesce((
    select json_agg(${entry('t', 's')} order by t.slug)
      from ${topicsWithRows(contactId)}
     where t.organization_id = ${organizationId}), '[]'::json)`;

/**
 * The same, for a statement that has just written subscription rows (CTE `written`, returning
 * contact_id, topic_id, state, source, changed_at) and topics (`topicsWritten`, returning id,
 * organization_id, slug, default_opt_in; or null): a statement's own writes are not in its
 * snapshot, so they are read from the CTEs and win over the snapshot's rows.
 */
export const subscriptionsJsonAfterWrite = (contactId: string, organizationId: string, topicsWritten: string | null) => `coalesce((
    select json_agg(${entry('t', 'e')} order by t.slug)
      from (select id, slug, default_opt_in from topics where organization_id = ${organizationId}
            ${topicsWritten ? `union select id, slug, default_opt_in from ${topicsWritten} where organization_id = ${organizationId}` : ''}) t
      left join lateral (
        select w.state, w.source, w.changed_at from written w where w.contact_id = ${contactId} and w.topic_id = t.id
        union all
        select s.state, s.source, s.changed_at from subscriptions s
         where s.contact_id = ${contactId} and s.topic_id = t.id
           and not exists (select 1 from written w where w.contact_id = ${contactId} and w.topic_id = t.id)
      ) e on true), '[]'::json)`;

/** Where a contact is named by its id or by its lower-cased email (one of the two parameters is null). */
export const contactMatch = (alias: string, organizationId: string, id: string, email: string) =>
  `${alias}.organization_id = ${organizationId} and (${alias}.id = ${id}::uuid or ${alias}.email = ${email}::text)`;
