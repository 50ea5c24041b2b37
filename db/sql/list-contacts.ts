import type { Orm } from '../orm';
import { audienceConditions, type AudienceCondition } from './audience-conditions';
import { contactColumns, subscriptionsJson, type ContactRow } from './contact-row';

export interface ListContactsFilter {
  organizationId: string;
  conditions: AudienceCondition[];
  /** Lower-cased start of the email address. */
  emailPrefix?: string;
  /** Keyset position: rows strictly older than this (created_at, id). */
  after?: { createdAt: Date; id: string };
  limit: number;
}

/** `like` pattern for a literal prefix; `!` escapes (a backslash would depend on how the driver quotes it). */
const likePrefix = (s: string) => `${s.replace(/[!%_]/g, (m) => `!${m}`)}%`;

/**
 * A page of contacts, newest first by (created_at, id), walking contacts_created_idx and stopping
 * after limit + 1 matches; each condition is an index probe per row walked (audience-conditions.ts),
 * and subscriptions are built only for the rows returned. An email prefix uses contacts_email_idx
 * (the column collates "C", so `like 'prefix%'` is a range on it) when the planner finds it more
 * selective. Plans: docs/audience.md.
 */
export function listContacts(orm: Orm, f: ListContactsFilter): Promise<ContactRow[]> {
  const params: unknown[] = [f.organizationId, f.organizationId];
  const where = ['c.organization_id = ?', ...audienceConditions(f.conditions, params)];
  if (f.emailPrefix !== undefined) {
    where.push(`c.email like ? escape '!'`);
    params.push(likePrefix(f.emailPrefix));
  }
  if (f.after !== undefined) {
    where.push('(c.created_at, c.id) < (?, ?)');
    params.push(f.after.createdAt, f.after.id);
  }
  return orm.em
    .fork()
    .getConnection()
    .execute(
      `select ${contactColumns('c')}, ${subscriptionsJson('c.id', '?')} as subscriptions
         from contacts c where ${where.join(' and ')}
        order by c.created_at desc, c.id desc limit ${Math.trunc(f.limit) + 1}`,
      params,
    );
}
