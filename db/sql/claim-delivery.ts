import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Moves the queued messages among `ids` to `sending`, owned by the workflow `owner`, and returns
 * each one's outcome: `claimed` (now, or by this same owner before a crash: the delivery resumes)
 * or the status that kept it from being claimed. The single point where cancel and pick-up race,
 * and where two batch workflows naming one message (a chunk claimed again after a crash, grouped
 * differently) are told apart. `acceptUnowned`: a message `sending` with no owner is resumed too
 * (SendEmail runs whose claim predates claimed_by; their workflow id is the email id, so no other
 * run names them).
 */
export async function claimForDelivery(
  em: EntityManager,
  q: { owner: string; ids: string[]; at: Date; acceptUnowned?: boolean },
): Promise<{ id: string; outcome: string }[]> {
  if (q.ids.length === 0) return [];
  const ids = `{${q.ids.join(',')}}`;
  return em.getConnection().execute<{ id: string; outcome: string }[]>(
    `
with won as (
  update emails set status = 'sending', claimed_by = ?, updated_at = ?
   where id = any(?::uuid[]) and status = 'queued'
  returning id
)
select e.id,
       case when w.id is not null
              or (e.status = 'sending' and (e.claimed_by = ? or (?::boolean and e.claimed_by is null))) then 'claimed'
            else e.status end as outcome
  from emails e left join won w on w.id = e.id
 where e.id = any(?::uuid[])`,
    [q.owner, q.at, ids, q.owner, q.acceptUnowned === true, ids],
    'all',
    em.getTransactionContext(),
  );
}
