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
  const run = (text: string, params: unknown[]) =>
    em.getConnection().execute<{ id: string; outcome: string }[]>(text, params, 'all', em.getTransactionContext());
  const rows = await run(
    `
with won as (
  update emails set status = 'sending', claimed_by = ?, updated_at = ?
   where id = any(?::uuid[]) and status = 'queued'
  returning id
)
select e.id, case when w.id is not null then 'claimed' else ${OUTCOME} end as outcome
  from emails e left join won w on w.id = e.id
 where e.id = any(?::uuid[])`,
    [q.owner, q.at, ids, q.owner, q.acceptUnowned === true, ids],
  );
  // A message still `queued` that this claim did not win was taken (canceled, or claimed by
  // another run) by a statement that committed while this one waited on its row: the select above
  // reads the statement's snapshot, so its outcome is read again, as that statement left it.
  const lost = rows.filter((r) => r.outcome === 'queued').map((r) => r.id);
  if (lost.length === 0) return rows;
  const again = new Map(
    (
      await run(`select e.id, ${OUTCOME} as outcome from emails e where e.id = any(?::uuid[])`, [
        q.owner,
        q.acceptUnowned === true,
        `{${lost.join(',')}}`,
      ])
    ).map((r) => [r.id, r.outcome]),
  );
  return rows.map((r) => (again.has(r.id) ? { id: r.id, outcome: again.get(r.id)! } : r));
}

/** A message's outcome by its row (not won by this statement): `claimed` when this owner holds it, else its status. */
const OUTCOME = `case when e.status = 'sending' and (e.claimed_by = ? or (?::boolean and e.claimed_by is null)) then 'claimed' else e.status end`;
