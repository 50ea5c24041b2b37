import type { Orm } from '../orm';
import type { PgTimestamp } from './pg-types';

/** A message waiting for its next direct-delivery attempt, as the console lists it. */
export interface RetryWaitingRow {
  id: string;
  organization_id: string;
  retry_reason: 'deferred' | 'site_suspended';
  retry_at: PgTimestamp;
  last_reply: string | null;
  deferrals: number;
}

/** The messages waiting for a retry, soonest first (emails_retry_idx), and how many wait in all. */
export async function listRetryWaiting(orm: Orm, limit: number): Promise<{ rows: RetryWaitingRow[]; total: number }> {
  const conn = orm.em.fork().getConnection();
  const [rows, [count]] = await Promise.all([
    conn.execute<RetryWaitingRow[]>(
      `select id, organization_id, retry_reason, retry_at, last_reply, deferrals from emails
        where retry_reason is not null order by retry_at limit ?`,
      [limit],
    ),
    conn.execute<{ n: number }[]>(`select count(*)::int as n from emails where retry_reason is not null`),
  ]);
  return { rows, total: count.n };
}
