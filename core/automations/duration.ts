/** The longest delay or wait an automation step may name: 365 days. Callers check it (parseDuration does not). */
export const MAX_DURATION_SECONDS = 365 * 86400;

/**
 * `PnW`, or `P[nD][T[nH][nM][nS]]`: integer components only, upper-case designators. Years and
 * months are not accepted (their length in seconds depends on the calendar), nor fractions, signs
 * or weeks combined with other components. At most 15 digits per component, so the sum is exact.
 */
const ISO_DURATION = /^P(?:(\d{1,15})W|(?:(\d{1,15})D)?(?:T(?:(\d{1,15})H)?(?:(\d{1,15})M)?(?:(\d{1,15})S)?)?)$/;

/**
 * A duration in whole seconds: a non-negative integer number of seconds, or an ISO 8601 duration
 * (`PT30M`, `P1D`, `P2W`, `P1DT2H3M4S`). Null when it is neither (`P`, `PT`, `P1Y`, `P1M`, `-1`,
 * `1.5`, `PT1.5S`, a numeric string, …) or not a safe integer.
 */
export function parseDuration(value: unknown): number | null {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : null;
  if (typeof value !== 'string' || value.length > 100) return null;
  const m = ISO_DURATION.exec(value);
  if (!m) return null;
  const [, weeks, days, hours, minutes, seconds] = m;
  // `P` alone, `PT` alone and `P1DT` name no component after their designator.
  if (value.endsWith('T') || value === 'P') return null;
  const n = (s: string | undefined) => (s === undefined ? 0 : Number(s));
  const total = n(weeks) * 7 * 86400 + n(days) * 86400 + n(hours) * 3600 + n(minutes) * 60 + n(seconds);
  return Number.isSafeInteger(total) ? total : null;
}
