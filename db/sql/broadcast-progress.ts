import type { Orm } from '../orm';

export interface BroadcastProgressRow {
  broadcast_id: string;
  queued: number;
  sent: number;
  delivered: number;
  bounced: number;
  complained: number;
  suppressed: number;
  failed: number;
  canceled: number;
  unsubscribed: number;
}

/**
 * Each broadcast's messages by status (emails_broadcast_idx), and how many of them were
 * unsubscribed from (one event per message at most). `queued` counts what has not left yet
 * (`queued` or `sending`); `sent` includes `unconfirmed`.
 */
export async function broadcastProgress(orm: Orm, ids: string[]): Promise<Map<string, BroadcastProgressRow>> {
  if (ids.length === 0) return new Map();
  const rows = await orm.em.fork().execute<BroadcastProgressRow[]>(
    `with s as (
       select broadcast_id,
              count(*) filter (where status in ('queued', 'sending'))::int as queued,
              count(*) filter (where status in ('sent', 'unconfirmed'))::int as sent,
              count(*) filter (where status = 'delivered')::int as delivered,
              count(*) filter (where status = 'bounced')::int as bounced,
              count(*) filter (where status = 'complained')::int as complained,
              count(*) filter (where status = 'suppressed')::int as suppressed,
              count(*) filter (where status = 'failed')::int as failed,
              count(*) filter (where status = 'canceled')::int as canceled
         from emails where broadcast_id = any(?::uuid[]) group by broadcast_id
     ), u as (
       select e.broadcast_id, count(*)::int as unsubscribed
         from emails e join email_events ev on ev.email_id = e.id and ev.type = 'unsubscribed'
        where e.broadcast_id = any(?::uuid[]) group by e.broadcast_id
     )
     select s.*, coalesce(u.unsubscribed, 0) as unsubscribed from s left join u on u.broadcast_id = s.broadcast_id`,
    [`{${ids.join(',')}}`, `{${ids.join(',')}}`],
  );
  return new Map(rows.map((r) => [r.broadcast_id, r]));
}
