import type { EntityManager } from '@mikro-orm/postgresql';

export interface ClaimedDelivery {
  id: string;
  run: number;
}

/**
 * The dispatcher's claim: deliveries whose run has not started, oldest first per endpoint, and
 * per endpoint only as many as fit its window (`window` minus its runs started and due now,
 * i.e. attempting or about to), so one slow or dead endpoint's backlog never takes the room of
 * another. Locked FOR UPDATE SKIP LOCKED until the caller marks them started in the same
 * transaction, so dispatchers of several processes never start one twice.
 */
export function claimWebhookDeliveries(em: EntityManager, window: number, limit: number): Promise<ClaimedDelivery[]> {
  return em.execute<ClaimedDelivery[]>(
    `select c.id, c.run
       from webhook_endpoints w
       cross join lateral (
         select d.id, d.run from webhook_deliveries d
          where d.endpoint_id = w.id and d.enqueued_at is null
          order by d.created_at, d.id
          limit greatest(0, ?::int - (select count(*) from (
                   select 1 from webhook_deliveries b
                    where b.endpoint_id = w.id and b.status = 'pending' and b.enqueued_at is not null and b.next_attempt_at <= now()
                    limit ?::int) busy))
          for update skip locked
       ) c
      where exists (select 1 from webhook_deliveries x where x.endpoint_id = w.id and x.enqueued_at is null)
      limit ?::int`,
    [window, window, limit],
  );
}

/** Marks claimed deliveries as started (their runs exist in the engine). */
export async function markWebhookDeliveriesStarted(em: EntityManager, ids: string[]): Promise<void> {
  // One array parameter (knex would spread a JS array into a list of parameters).
  if (ids.length) await em.execute(`update webhook_deliveries set enqueued_at = now() where id = any(?::uuid[])`, [`{${ids.join(',')}}`]);
}
