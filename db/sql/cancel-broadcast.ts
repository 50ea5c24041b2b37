import type { Orm } from '../orm';

/**
 * Cancels a broadcast of the organization while it is `queued` or `sending` and not yet fully
 * left, and with it every message of it still `queued` (parked behind a cap or waiting for its
 * workflow): the same conditional update as a single message's cancel, so a message the worker
 * already picked up (`sending`) goes on. One statement. Answers whether the broadcast changed and
 * how many messages were canceled; `cancelMessagesOf` alone sweeps a canceled broadcast's messages
 * that a page stored while the cancel ran.
 */
export async function cancelBroadcast(
  orm: Orm,
  organizationId: string,
  broadcastId: string,
  now: Date,
): Promise<{ changed: boolean; canceled: number; status: string | null }> {
  const [row] = await orm.em.fork().execute<{ changed: boolean; canceled: number; status: string | null }[]>(
    `with b as (
       update broadcasts x set status = 'canceled', canceled_at = ?, updated_at = ?
        where x.id = ? and x.organization_id = ? and x.status in ('queued', 'sending')
          and not (x.fanned_out_at is not null
                   and not exists (select 1 from emails e where e.broadcast_id = x.id and e.status in ('queued', 'sending')))
       returning x.id
     ), e as (
       update emails set status = 'canceled', waiting_reason = null, waiting_until = null, updated_at = ?
        where broadcast_id in (select id from b) and status = 'queued'
       returning 1
     )
     select exists (select 1 from b) as changed, (select count(*) from e)::int as canceled,
            (select status from broadcasts where id = ? and organization_id = ?) as status`,
    [now, now, broadcastId, organizationId, now, broadcastId, organizationId],
  );
  return row;
}

export async function cancelMessagesOf(orm: Orm, broadcastId: string, now: Date): Promise<number> {
  const rows = await orm.em.fork().execute<{ n: number }[]>(
    `with e as (
         update emails set status = 'canceled', waiting_reason = null, waiting_until = null, updated_at = ?
          where broadcast_id = ? and status = 'queued' returning 1
       ) select count(*)::int as n from e`,
    [now, broadcastId],
  );
  return rows[0].n;
}
