import type { EntityManager } from '@mikro-orm/postgresql';
import type { Plan } from '../entities';
import { PLATFORM_SCOPE_ID } from './reserve-send';
import type { PgTimestamp } from './pg-types';

/** A domain with parked mail, oldest first, with what its allowances depend on. */
export interface ParkedDomain {
  domain_id: string;
  organization_id: string;
  plan: Plan;
  daily_send_cap: number | null;
  warmup_stage: number | null;
  oldest: PgTimestamp;
}

/**
 * The domains that have parked messages, by their oldest one (creation order across domains).
 * A loose index scan over emails_parked_idx: one seek per domain, however deep each backlog is.
 */
export async function parkedDomains(em: EntityManager): Promise<ParkedDomain[]> {
  return em.getConnection().execute<ParkedDomain[]>(
    `
with recursive doms as (
  (select domain_id from emails where waiting_reason is not null order by domain_id limit 1)
  union all
  select (select e.domain_id from emails e where e.waiting_reason is not null and e.domain_id > doms.domain_id
           order by e.domain_id limit 1)
    from doms where doms.domain_id is not null
)
select d.id as domain_id, d.organization_id, o.plan, o.daily_send_cap, d.warmup_stage,
       (select min(e.created_at) from emails e where e.domain_id = d.id and e.waiting_reason is not null) as oldest
  from doms join domains d on d.id = doms.domain_id join organizations o on o.id = d.organization_id
 order by oldest`,
    [],
    'all',
    em.getTransactionContext(),
  );
}

/** Recipients reserved so far on `day` per scope id (platform under PLATFORM_SCOPE_ID). */
export async function usedOn(em: EntityManager, day: string, scopeIds: string[]): Promise<Map<string, number>> {
  const rows = await em
    .getConnection()
    .execute<{ scope: string; scope_id: string; used: number }[]>(
      `select scope, scope_id, used from send_counters where day = ?::date and scope_id = any(?::uuid[])`,
      [day, `{${[...new Set([PLATFORM_SCOPE_ID, ...scopeIds])].join(',')}}`],
      'all',
      em.getTransactionContext(),
    );
  return new Map(rows.map((r) => [`${r.scope}:${r.scope_id}`, r.used]));
}

/**
 * Lets the `n` oldest parked messages of a domain back into the outbox (creation order), which
 * reserves them again; a message that still does not fit is parked again. Returns how many woke.
 */
export async function unpark(em: EntityManager, domainId: string, n: number): Promise<number> {
  const res = await em.getConnection().execute<{ id: string }[]>(
    `update emails set waiting_reason = null, waiting_until = null
      where id in (select id from emails where domain_id = ? and waiting_reason is not null
                    order by created_at, id limit ? for update skip locked)
      returning id`,
    [domainId, n],
    'all',
    em.getTransactionContext(),
  );
  return res.length;
}
