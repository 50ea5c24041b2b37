import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Takes up to `want` starts from the platform send rate's window `windowNo` (at most `limit` per
 * window) and returns how many it got. The one row is locked until the caller's transaction ends,
 * so outboxes of several processes share the window exactly; a new window number starts from zero.
 */
export async function takeSendRate(em: EntityManager, q: { windowNo: number; limit: number; want: number }): Promise<number> {
  if (q.want <= 0) return 0;
  const [row] = await em.getConnection().execute<{ n: number }[]>(
    `
with cur as (
  select case when window_no = ?::bigint then used else 0 end as used from send_rate where id = 1 for update
), grant_ as (
  select cur.used, greatest(0, least(?::int, ?::int - cur.used)) as n from cur
)
update send_rate s set window_no = ?::bigint, used = g.used + g.n
  from grant_ g
 where s.id = 1
returning g.n`,
    [q.windowNo, q.want, q.limit, q.windowNo],
    'all',
    em.getTransactionContext(),
  );
  return row ? Number(row.n) : 0;
}

/**
 * Starts left in the platform send rate's window `windowNo`, read without a lock: a hint for how
 * much to claim, never a grant (takeSendRate decides, so a stale answer costs a claim, not the rate).
 */
export async function sendRateRoom(em: EntityManager, q: { windowNo: number; limit: number }): Promise<number> {
  const [row] = await em
    .getConnection()
    .execute<{ n: number }[]>(
      `select case when window_no = ?::bigint then greatest(0, ?::int - used) else ?::int end as n from send_rate where id = 1`,
      [q.windowNo, q.limit, q.limit],
    );
  return row ? Number(row.n) : q.limit;
}
