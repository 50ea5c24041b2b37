/**
 * When a deferred message is tried again (issue 40, Outcomes): 5 minutes after its first deferral,
 * doubling each time, never more than 4 hours apart, and not after the message's maximum age
 * (RETRY_MAX_AGE_HOURS, 4 days by default, chosen by the caller). The gap grows so a destination
 * that is down or throttling us is not hammered; the cap keeps a message from waiting half a day
 * after the destination has recovered.
 */

/** The wait after the first deferral: 5 minutes. */
export const DEFER_BASE_MS = 300_000;
/** The longest wait between two attempts: 4 hours. */
export const DEFER_CAP_MS = 14_400_000;

/** The wait before the next attempt, given how many deferrals came before this one (0 → 5 min, 1 → 10 min, …, ≤ 4 h). */
export function deferDelayMs(deferrals: number): number {
  // A count that is not a sane whole number (a corrupt row) gets the first step rather than NaN or zero.
  const n = Number.isFinite(deferrals) && deferrals > 0 ? Math.floor(deferrals) : 0;
  // Past 2^6 the cap holds anyway; stopping the exponent there keeps the product finite.
  return Math.min(DEFER_BASE_MS * 2 ** Math.min(n, 32), DEFER_CAP_MS);
}

/**
 * The next attempt of a message deferred `deferrals` times before now, first tried at `since`:
 * the backoff step, or `notBefore` (a suspended site's end) when that is later; or expired when
 * that attempt would fall past the maximum age, so the message bounces now instead of waiting for
 * an attempt it may not make.
 */
export function nextAttempt(q: {
  deferrals: number;
  now: Date;
  since: Date;
  maxAgeMs: number;
  notBefore?: Date;
}): { retryAt: Date } | { expired: true } {
  let at = q.now.getTime() + deferDelayMs(q.deferrals);
  if (q.notBefore && q.notBefore.getTime() > at) at = q.notBefore.getTime();
  if (at - q.since.getTime() > q.maxAgeMs) return { expired: true };
  return { retryAt: new Date(at) };
}
