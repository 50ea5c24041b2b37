/**
 * The per-key request window, written once: every statement that charges a key (authentication,
 * db/sql/authenticate.ts, and the send store, db/sql/store-emails.ts) is built from these pieces,
 * so both apply the same rule.
 *
 * The rule (spec, Limits): each key has a budget per one-second window, `rate_limit` or the
 * default of 10. A request passes while the window has room for its cost; a batch also passes
 * when the window is empty before it (so a batch sent in an empty second always passes, even at
 * the default cap). A refused request is charged too: every request a key makes in a second
 * counts against that second, whatever its answer. The window starts afresh each second.
 *
 * The window lives in PostgreSQL (table key_rate_windows, one row per key), so every process
 * sharing the database enforces one budget; concurrent charges of a key serialize on its row.
 */

/** The spec's default per-key request rate, per second. */
export const DEFAULT_RATE_LIMIT = 10;

/** A key's cap, from its `rate_limit` column (null: the default). */
export const capOf = (rateLimit: string) => `coalesce(${rateLimit}, ${DEFAULT_RATE_LIMIT})`;

/**
 * An upsert charging each key of `rows` (a query yielding one `api_key_id, used` per key) to the
 * window of the current second; returns `api_key_id`, `window_start` and `used` (after the
 * charge). Keys are charged in key order, so statements of other processes charging the same keys
 * cannot deadlock.
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
