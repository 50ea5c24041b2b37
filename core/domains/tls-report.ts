/**
 * A TLS-RPT aggregate report (RFC 8460 §4) as this service keeps it: who sent it, its id, the UTC
 * day its range starts, and the session counts of each policy domain. Pure: the endpoint
 * (api/public/mta-sts.ts) has already bounded the size and parsed the JSON. Anything a sender
 * puts beyond these fields (failure details, the policy strings) is not kept.
 */
export interface TlsReport {
  reporter: string;
  reportId: string;
  day: string;
  policies: { domain: string; successes: number; failures: number }[];
}

/** Longer names and ids than any real report uses; refused rather than stored. */
const MAX_TEXT = 256;
const MAX_POLICIES = 1000;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const text = (v: unknown) => (typeof v === 'string' && v.trim() !== '' && v.length <= MAX_TEXT ? v.trim() : null);
const count = (v: unknown) => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? v : null);

/** A host name as reports write it, compared lower-case and without a trailing dot. */
export const normalHost = (h: string) => h.trim().toLowerCase().replace(/\.$/, '');

export function parseTlsReport(value: unknown): TlsReport | { error: string } {
  if (!isObject(value)) return { error: 'the report is not a JSON object' };
  const reporter = text(value['organization-name']);
  if (reporter === null) return { error: 'organization-name is missing or not a short string' };
  const reportId = text(value['report-id']);
  if (reportId === null) return { error: 'report-id is missing or not a short string' };
  const range = value['date-range'];
  const start = isObject(range) ? range['start-datetime'] : undefined;
  const day = typeof start === 'string' ? utcDay(start) : null;
  if (day === null) return { error: 'date-range.start-datetime is not an RFC 3339 date-time' };
  const list = value.policies;
  if (!Array.isArray(list) || list.length === 0) return { error: 'policies is not a non-empty list' };
  if (list.length > MAX_POLICIES) return { error: `more than ${MAX_POLICIES} policies` };
  const policies: TlsReport['policies'] = [];
  for (const [i, p] of list.entries()) {
    const policy = isObject(p) ? p.policy : undefined;
    const summary = isObject(p) ? p.summary : undefined;
    const domain = isObject(policy) ? text(policy['policy-domain']) : null;
    if (domain === null) return { error: `policies[${i}].policy.policy-domain is missing` };
    const successes = isObject(summary) ? count(summary['total-successful-session-count']) : null;
    const failures = isObject(summary) ? count(summary['total-failure-session-count']) : null;
    if (successes === null || failures === null) return { error: `policies[${i}].summary counts are not non-negative integers` };
    policies.push({ domain: normalHost(domain), successes, failures });
  }
  return { reporter, reportId, day, policies };
}

/** The UTC day of an RFC 3339 date-time, within years a report can be about. */
function utcDay(s: string): string | null {
  if (!/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/.test(s)) return null;
  const t = Date.parse(s.replace(' ', 'T'));
  if (Number.isNaN(t)) return null;
  const iso = new Date(t).toISOString();
  const year = Number(iso.slice(0, 4));
  return year >= 2000 && year <= 9999 ? iso.slice(0, 10) : null;
}

/**
 * The counts of one host in a report: the sum over its policies (a sender may list several, e.g.
 * `sts` and `no-policy-found` for the same domain), or null when the report is about other domains.
 */
export function countsFor(report: TlsReport, host: string): { successes: number; failures: number } | null {
  const mine = report.policies.filter((p) => p.domain === normalHost(host));
  if (mine.length === 0) return null;
  const sum = (k: 'successes' | 'failures') => mine.reduce((n, p) => n + p[k], 0);
  // Sums of safe integers may leave the safe range: capped rather than stored wrong.
  return { successes: Math.min(sum('successes'), Number.MAX_SAFE_INTEGER), failures: Math.min(sum('failures'), Number.MAX_SAFE_INTEGER) };
}
