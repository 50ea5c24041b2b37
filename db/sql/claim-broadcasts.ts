import type { Orm } from '../orm';
import type { PgTimestamp } from './pg-types';

/**
 * The broadcast outbox: broadcasts whose fan-out run was not started yet (the API's insert
 * committed them with `enqueued_at` null), oldest first. The dispatcher starts each run and only
 * then marks it (markBroadcastStarted): a crash in between leaves the row to start again, and
 * starting a run that exists is a no-op, so nothing is lost and nothing runs twice.
 */
export async function unstartedBroadcasts(
  orm: Orm,
  limit: number,
): Promise<{ id: string; organization_id: string; scheduled_at: PgTimestamp | null }[]> {
  return orm.em
    .fork()
    .execute('select id, organization_id, scheduled_at from broadcasts where enqueued_at is null order by created_at limit ?', [limit]);
}

export async function markBroadcastStarted(orm: Orm, id: string, now: Date): Promise<void> {
  await orm.em.fork().execute('update broadcasts set enqueued_at = ? where id = ? and enqueued_at is null', [now, id]);
}
