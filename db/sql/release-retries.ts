import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Puts messages whose next attempt is due (direct delivery: an MX refused them for now, or their
 * site was suspended) back in the outbox, which claims them like new mail, oldest first. A range
 * scan of emails_retry_idx: waiting messages cost nothing until their time. A message canceled
 * meanwhile only loses its retry; it is not released. Answers how many went back.
 */
export async function releaseDueRetries(em: EntityManager, q: { now: Date; limit: number }): Promise<number> {
  const rows = await em.getConnection().execute<{ id: string }[]>(
    `
update emails e set retry_reason = null, retry_at = null,
       enqueued_at = case when e.status = 'queued' then null else e.enqueued_at end, updated_at = ?
 where e.id in (select id from emails where retry_reason is not null and retry_at <= ? order by retry_at limit ? for update skip locked)
returning e.id, e.status`,
    [q.now, q.now, q.limit],
    'all',
    em.getTransactionContext(),
  );
  return rows.length;
}
