import { keyForToken } from './key-for-token';

/**
 * The per-key request window, written once: every statement that charges a key (authentication,
 * db/sql/authenticate.ts, and the send store, db/sql/store-emails.ts) is built from these pieces,
 * so both apply the same rule.
 *
 * The rule (spec, Limits): each key has a budget per one-second window, `rate_limit` or the
 * default of 10. A request passes while the window has room for its cost; a batch also passes
 * when the window is empty before it (so a batch sent in an empty second always passes, even at
 * the default cap). An admitted request is charged its cost; a refused one counts as one request:
 * every request a key makes in a second counts against that second, whatever its answer, but a
 * refused batch does not take the room of 100. The window starts afresh each second.
 *
 * The window lives in PostgreSQL (table key_rate_windows, one row per key), so every process
 * sharing the database enforces one budget; concurrent charges of a key serialize on its row.
 */

/** The spec's default per-key request rate, per second. */
export const DEFAULT_RATE_LIMIT = 10;

/** A key's cap, from its `rate_limit` column (null: the default). */
export const capOf = (rateLimit: string) => `coalesce(${rateLimit}, ${DEFAULT_RATE_LIMIT})`;

/**
 * An upsert charging each key of `rows` (a query yielding one `api_key_id, used` per key: the sum
 * of a group of requests' costs) to the window of the current second; returns `api_key_id`,
 * `window_start` and `used` (after the charge). The group's requests are then admitted in order
 * by `admits` over the running sum (db/sql/store-emails.ts); they cost one each (single sends) or
 * nothing (a batch that reserved), so a refused one counts as one, as above. Keys are charged in
 * key order, so statements of other processes charging the same keys cannot deadlock.
 */
export const chargeWindows = (rows: string) => `
  insert into key_rate_windows as w (api_key_id, window_start, used)
  select r.api_key_id, date_trunc('second', now()), r.used from (${rows}) r order by r.api_key_id
  on conflict (api_key_id) do update
     set window_start = excluded.window_start,
         used = case when w.window_start = excluded.window_start then w.used + excluded.used else excluded.used end
  returning w.api_key_id, w.window_start, w.used`;

/** Admission of one request: `usedBefore` is the window's count before its own `cost`. */
export const admits = (usedBefore: string, cost: string, cap: string, batch: string) =>
  `(${usedBefore} + ${cost} <= ${cap} or (${batch} and ${usedBefore} = 0))`;

/**
 * Requests that each cost one, authenticated by token and charged as a group: from a relation
 * `q` with `req` (its order) and `token_hash`, the CTEs `k` (each request's key), `kc`, `charged`
 * and `p`: each request with its key's columns (`id`, `organization_id`, `mode`, `domain_ids`,
 * `rate_limit`) and `admitted`, in order over the running count of the window (contact upserts,
 * events). A token that names no live key has no row in `p`.
 */
export const requestsByToken = (q: string) => `k as (
  select ${q}.req, a.id, a.organization_id, a.mode, a.domain_ids, a.rate_limit, ${capOf('a.rate_limit')} as cap
    from ${q} cross join lateral (select a.* from ${keyForToken(`${q}.token_hash`)}) a
), kc as (
  select id, count(*)::int as n from k group by id
), charged as (${chargeWindows('select id as api_key_id, n as used from kc')}
), p as (
  select k.*, ${admits('(c.used - kc.n + row_number() over (partition by k.id order by k.req) - 1)', '1', 'k.cap', 'false')} as admitted
    from k join kc on kc.id = k.id join charged c on c.api_key_id = k.id
)`;

/**
 * An upsert charging one request of the key in `key` (a relation with `id` and `rate_limit`):
 * admission is decided against the locked window row, and the charge is the cost when admitted,
 * else one. Returns `window_start`, `used` and `admitted`. `cost` and `batch` are SQL expressions.
 */
export const chargeRequest = (key: string, cost: string, batch: string) => {
  const cap = `(select ${capOf('rate_limit')} from ${key})`;
  const before = `(case when w.window_start = excluded.window_start then w.used else 0 end)`;
  return `
  insert into key_rate_windows as w (api_key_id, window_start, used, admitted)
  select id, date_trunc('second', now()),
         case when ${admits('0', cost, cap, batch)} then ${cost} else 1 end, ${admits('0', cost, cap, batch)} from ${key}
  on conflict (api_key_id) do update
     set window_start = excluded.window_start,
         used = ${before} + case when ${admits(before, cost, cap, batch)} then ${cost} else 1 end,
         admitted = ${admits(before, cost, cap, batch)}
  returning w.window_start, w.used, w.admitted`;
};

/**
 * Gives back the unused part of a reservation (a batch reserves 100, then costs one per message),
 * within the window it was taken from only: once the second has turned, the new window owes it
 * nothing. `key`, `windowStart` and `tokens` are SQL expressions.
 */
export const refundWindow = (key: string, windowStart: string, tokens: string) =>
  `update key_rate_windows set used = greatest(used - ${tokens}, 0) where api_key_id = ${key} and window_start = ${windowStart}`;
