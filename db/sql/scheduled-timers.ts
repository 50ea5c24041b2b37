import type { EntityManager } from '@mikro-orm/postgresql';
import type { KeyMode, Stream } from '../entities';

/** A scheduled message whose SendEmail run the outbox starts ahead of its time (ENGINE=temporal). */
export interface ScheduledRow {
  id: string;
  organization_id: string;
  kind: string | null;
  subject: string;
}

/**
 * Claims up to `limit` messages of one mode and stream that are scheduled later than `after`,
 * soonest first, FOR UPDATE SKIP LOCKED: each gets a run that waits on the engine's durable timer
 * (markEnqueued takes it out of the outbox once its run started). The same range of
 * emails_outbox_idx as the due claim, from the other end: `after` is now plus a lead, and
 * created_at never lies ahead, so only scheduled mail matches; a message its run already handed
 * back waits here until due, whatever the clocks say (its run has ended: no second one).
 */
export async function claimScheduled(
  em: EntityManager,
  q: { mode: KeyMode; stream: Stream; after: Date; limit: number },
): Promise<ScheduledRow[]> {
  if (q.limit <= 0) return [];
  return em.getConnection().execute<ScheduledRow[]>(
    `select id, organization_id, kind, left(subject, 200) as subject from emails
      where enqueued_at is null and waiting_reason is null and mode = ? and stream = ?
        and coalesce(scheduled_at, created_at) > ? and handed_back_at is null
      order by coalesce(scheduled_at, created_at), id
      limit ?
      for update skip locked`,
    [q.mode, q.stream, q.after, q.limit],
    'all',
    em.getTransactionContext(),
  );
}

/**
 * A scheduled message whose run's timer fired goes back to the outbox (enqueued_at null): the
 * outbox reserves its daily allowances and starts its delivery as for any due message. Only a
 * `queued` message goes back; answers the message's status either way (null: no such message).
 */
export async function handBackScheduled(em: EntityManager, emailId: string): Promise<string | null> {
  const [row] = await em.getConnection().execute<{ status: string | null }[]>(
    `with back as (update emails set enqueued_at = null, handed_back_at = coalesce(handed_back_at, now())
                    where id = ? and status = 'queued' returning status)
     select coalesce((select status from back), (select status from emails where id = ?)) as status`,
    [emailId, emailId],
    'all',
    em.getTransactionContext(),
  );
  return row?.status ?? null;
}
