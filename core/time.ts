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

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * A duration in milliseconds, or null: `90m`, `36h`, `3d`, `2w`, `45s`, or ISO 8601 without years
 * and months (whose length varies): `P3D`, `PT36H`, `P1DT12H30M`, `P2W`. Zero is null.
 */
export function parseDuration(s: string): number | null {
  const t = s.trim();
  const short = /^(\d{1,9})([smhdw])$/.exec(t);
  if (short) return Number(short[1]) * UNIT_MS[short[2]] || null;
  const iso = /^P(?:(\d{1,9})W)?(?:(\d{1,9})D)?(?:T(?:(\d{1,9})H)?(?:(\d{1,9})M)?(?:(\d{1,9})S)?)?$/i.exec(t);
  if (!iso || t.toUpperCase() === 'P' || /T$/i.test(t)) return null;
  const [, w, d, h, m, sec] = iso.map((x) => Number(x ?? 0));
  return w * UNIT_MS.w + d * UNIT_MS.d + h * UNIT_MS.h + m * UNIT_MS.m + sec * UNIT_MS.s || null;
}
