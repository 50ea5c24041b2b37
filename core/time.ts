/**
 * Timestamps a client may send: ISO 8601, `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM[:SS[.fraction]]` with
 * `Z` or `±HH:MM` (without an offset a date-time is UTC), between 1970-01-01 and 9999-12-31 UTC.
 * JavaScript alone accepts years like +275760 or -271821 that PostgreSQL refuses or stores as
 * something else, and Date.parse reads an offset-less time in the server's own zone.
 */
export const MIN_TIMESTAMP_MS = Date.UTC(1970, 0, 1);
export const MAX_TIMESTAMP_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2})?)?$/;

/** The instant `s` names, or null when it is not such a timestamp (or an impossible date like Feb 30). */
export function parseTimestamp(s: string, opts: { requireOffset?: boolean } = {}): Date | null {
  const m = ISO.exec(s);
  if (!m) return null;
  const [, y, mo, d, h, mi, sec, frac, offset] = m;
  if (opts.requireOffset && !offset) return null;
  const [year, month, day, hour, minute, second] = [y, mo, d, h ?? '0', mi ?? '0', sec ?? '0'].map(Number);
  const ms = frac ? Number(frac.slice(0, 3).padEnd(3, '0')) : 0;
  // Before Date.UTC, which reads years 0 to 99 as 1900 to 1999.
  if (year < 1970 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  const local = Date.UTC(year, month - 1, day, hour, minute, second, ms);
  // Date.UTC rolls 2026-02-30 over into March; a real date survives the round trip.
  if (new Date(local).getUTCDate() !== day) return null;
  let t = local;
  if (offset && offset !== 'Z') {
    const sign = offset[0] === '-' ? -1 : 1;
    const [oh, om] = offset.slice(1).split(':').map(Number);
    if (oh > 23 || om > 59) return null;
    t -= sign * (oh * 60 + om) * 60_000;
  }
  return inRange(t) ? new Date(t) : null;
}

/** Within what the service stores and compares: 1970 through 9999. */
export function inRange(ms: number): boolean {
  return Number.isFinite(ms) && ms >= MIN_TIMESTAMP_MS && ms <= MAX_TIMESTAMP_MS;
}
