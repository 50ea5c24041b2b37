import type { Orm } from '../orm';

/**
 * Console sign-in attempts counted per key (`account:<email>`, `address:<ip>`) and fixed window,
 * in PostgreSQL, so every process sharing the database applies one limit (core/console/sign-in.ts).
 *
 * An attempt is charged before its password is checked and given back when it turns out not to
 * be a failure (a success, a refusal for a lock): concurrent attempts serialize on the key's row,
 * so a burst of guesses sent at once is held to the limit as surely as guesses sent one by one.
 */

const conn = (orm: Orm) => orm.em.fork().getConnection();

/** What a charge counted: each key's attempts in the window (this one included). */
export interface Charge {
  /** The window's start, epoch ms: refunds go to the window that was charged. */
  windowStart: number;
  account: number;
  address: number;
}

/**
 * Charges one attempt to both keys in the current window of `windowMs`. Past windows are deleted
 * along the way (at most 100 rows a call, skipping rows another statement holds, so this never
 * waits on them); the keys' rows are charged in key order, so concurrent charges cannot deadlock.
 */
export async function chargeAttempt(orm: Orm, accountKey: string, addressKey: string, windowMs: number): Promise<Charge> {
  const rows = await conn(orm).execute<{ key: string; window_start: number; count: number }[]>(
    `
with w as (
  select to_timestamp(floor(extract(epoch from now()) * 1000 / ?) * ? / 1000.0) as start
), past as (
  delete from console_signin_failures where ctid = any (array(
    select ctid from console_signin_failures where window_start < (select start from w) limit 100 for update skip locked))
), c as (
  insert into console_signin_failures as f (key, window_start, count)
  select v.key, w.start, 1 from (values (?), (?)) v(key) cross join w order by v.key
  on conflict (key, window_start) do update set count = f.count + 1
  returning f.key, f.window_start, f.count
)
select key, (extract(epoch from window_start) * 1000)::float8 as window_start, count from c`,
    [windowMs, windowMs, accountKey, addressKey],
  );
  const count = (key: string) => rows.find((r) => r.key === key)!.count;
  return { windowStart: rows[0].window_start, account: count(accountKey), address: count(addressKey) };
}

/** Gives back one charged attempt of each key, in the window it was charged to. */
export async function refundAttempt(orm: Orm, keys: string[], windowStart: number): Promise<void> {
  if (keys.length === 0) return;
  await conn(orm).execute(
    `update console_signin_failures set count = greatest(count - 1, 0)
      where key in (${keys.map(() => '?').join(', ')}) and window_start = to_timestamp(? / 1000.0)`,
    [...keys, windowStart],
  );
}

/** A success: the account's failures are forgotten, and the address gets its attempt back. */
export async function clearAccount(orm: Orm, accountKey: string, addressKey: string, windowStart: number): Promise<void> {
  await conn(orm).execute(
    `
with a as (
  delete from console_signin_failures where key = ?
)
update console_signin_failures set count = greatest(count - 1, 0) where key = ? and window_start = to_timestamp(? / 1000.0)`,
    [accountKey, addressKey, windowStart],
  );
}
