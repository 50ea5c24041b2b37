import type { Orm } from '../orm';
import { audienceConditions, type AudienceCondition } from './audience-conditions';

/**
 * How many contacts of the organization meet every condition (a segment's `contact_count`):
 * one pass over the organization's contacts with a hash (anti-)join per topic condition on
 * subscriptions_topic_idx. Plans: docs/audience.md.
 */
export async function countContacts(orm: Orm, organizationId: string, conditions: AudienceCondition[]): Promise<number> {
  const params: unknown[] = [organizationId];
  const where = ['c.organization_id = ?', ...audienceConditions(conditions, params)];
  const [row] = await orm.em
    .fork()
    .getConnection()
    .execute(`select count(*)::int as n from contacts c where ${where.join(' and ')}`, params);
  return row.n as number;
}
