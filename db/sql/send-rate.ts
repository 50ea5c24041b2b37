import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

/** Starts already taken from window `$window` of the one row: a new window number starts from zero. */
const usedIn = (window: string) => `case when window_no = ${window}::bigint then used else 0 end`;

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
  select ${usedIn('?')} as used from send_rate where id = 1 for update
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
 * Prepared: a live lane's every outbox chunk asks it.
 */
const SEND_RATE_ROOM: PreparedStatement = {
  name: 'send_rate_room_v1',
  text: `select greatest(0, $2::int - ${usedIn('$1')}) as n from send_rate where id = 1`,
};

export async function sendRateRoom(orm: Orm, q: { windowNo: number; limit: number }): Promise<number> {
  const [row] = await runPrepared<{ n: number }>(orm, SEND_RATE_ROOM, [q.windowNo, q.limit]);
  return row ? Number(row.n) : q.limit;
}
