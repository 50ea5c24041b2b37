import type { Orm } from '../orm';
import { cancelQueued } from './cancel-emails';

/**
 * Cancels a broadcast of the organization while it is `queued` or `sending` and not yet fully
 * left, and with it every message of it still `queued` (parked behind a cap or waiting for its
 * workflow): the same cancel as a single message's (db/sql/cancel-emails.ts), so a message the worker
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
     ), ${cancelQueued("e.broadcast_id in (select id from b) and e.status = 'queued'", '?::timestamptz')}
     select exists (select 1 from b) as changed, (select count(*) from canceled)::int as canceled,
            (select status from broadcasts where id = ? and organization_id = ?) as status`,
    [now, now, broadcastId, organizationId, now, now, broadcastId, organizationId],
  );
  return row;
}

export async function cancelMessagesOf(orm: Orm, broadcastId: string, now: Date): Promise<number> {
  const rows = await orm.em.fork().execute<{ n: number }[]>(
    `with ${cancelQueued("e.broadcast_id = ?::uuid and e.status = 'queued'", '?::timestamptz')} select count(*)::int as n from canceled`,
    // cancel_target names the broadcast before the update and the events take the time.
    [broadcastId, now, now],
  );
  return rows[0].n;
}
