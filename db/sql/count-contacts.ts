import type { Orm } from '../orm';
import { audienceConditions, type AudienceCondition } from './audience-conditions';

/**
 * How many contacts of the organization meet every condition (a segment's `contact_count`): one
 * pass over the organization's contacts with a hash (anti-)join per topic condition, the hash
 * built from the topic's rows on subscriptions_topic_idx (the small side).
 *
 * Parallel query is off for this statement only. With it, PostgreSQL 17 chose a parallel hash
 * *right* anti join that hashes the organization's contacts instead of the topic's rows; measured
 * on the benchmark machine (2 vCPUs, 100,000 contacts, 15 runs each, median): default 97 ms,
 * without parallel hash 66 ms, without parallel workers 41 ms. The count shares its cores with
 * the API and the engine, so a single process scanning is the better use of them.
 * Plans: docs/audience.md.
 */
export async function countContacts(orm: Orm, organizationId: string, conditions: AudienceCondition[]): Promise<number> {
  const params: unknown[] = [organizationId];
  const where = ['c.organization_id = ?', ...audienceConditions(conditions, params)];
  return orm.em.fork().transactional(async (em) => {
    await em.execute('set local max_parallel_workers_per_gather = 0');
    const [row] = await em.execute(`select count(*)::int as n from contacts c where ${where.join(' and ')}`, params);
    return row.n as number;
  });
}
