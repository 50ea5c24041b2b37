import defaultShaping from './default-shaping.json';

/**
 * Traffic shaping per destination "site" (issue 40; KumoMTA's term): the recipient domains that
 * share an MX set share one set of limits, since they share the receiving machines that count our
 * connections. The limits are a JSON file (DELIVERY_SHAPING_FILE; default-shaping.json is the one
 * shipped and the one operators copy): a `default` row, and named `sites` matched by MX host
 * patterns for the big mailbox providers, whose MX sets are many but whose limits are one.
 *
 * File format: `{ "default": LIMITS, "sites": [{ "name", "mx": [patterns], ...LIMITS }] }`, where
 * LIMITS are the fields of SiteLimits. Every row may also carry `source` or `comment` (strings,
 * not read: JSON has no comments, and the numbers should say where they come from). Any other key
 * is refused, so a misspelt limit is an error at start-up rather than a silently ignored row.
 */

export interface SiteLimits {
  /** Concurrent connections per (source IP, site). */
  connections: number;
  /** Messages sent over one connection before it is closed. */
  messagesPerConnection: number;
  /** Messages per minute per (source IP, site). */
  perMinute: number;
  /** How long a site stays suspended for a source IP after a throttling reply. */
  suspendMinutes: number;
  /** Reply texts (case-insensitive substrings) that, on a 4xx, mean "slow down": see suspends(). */
  suspendOn: string[];
}

/**
 * A named site. `mx` holds host patterns: "aspmx.l.google.com" matches that host only;
 * "*.google.com" matches any host under google.com, at any depth (aspmx.l.google.com and
 * alt1.aspmx.l.google.com alike) but not google.com itself. Any depth, unlike MTA-STS's one
 * label, because providers nest their MX hosts (x.olc.protection.outlook.com) and a pattern is
 * meant to name the provider, not one layer of its naming.
 */
export interface SiteRule extends SiteLimits {
  name: string;
  mx: string[];
}

export interface Shaping {
  default: SiteLimits;
  sites: SiteRule[];
}

/** A shaping file that cannot be used; the message names the field at fault (e.g. `sites[1].connections`). */
export class ShapingError extends Error {}

const LIMIT_KEYS = ['connections', 'messagesPerConnection', 'perMinute', 'suspendMinutes', 'suspendOn'] as const;
const NOTE_KEYS = ['source', 'comment'];
const HOST = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

const normalHost = (h: string) => h.trim().toLowerCase().replace(/\.$/, '');

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function wholeNumber(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw new ShapingError(`${field}: expected a whole number of at least 1`);
  return v;
}

function texts(v: unknown, field: string): string[] {
  if (!Array.isArray(v)) throw new ShapingError(`${field}: expected a list of texts`);
  return v.map((t, i) => {
    if (typeof t !== 'string' || t.trim() === '') throw new ShapingError(`${field}[${i}]: expected a non-empty text`);
    return t;
  });
}

function checkKeys(row: Record<string, unknown>, field: string, allowed: readonly string[]): void {
  for (const key of Object.keys(row)) {
    if (!allowed.includes(key)) throw new ShapingError(`${field}.${key}: unknown field`);
    if (NOTE_KEYS.includes(key) && typeof row[key] !== 'string') throw new ShapingError(`${field}.${key}: expected a text`);
  }
}

/** The limits of one row; a field it lacks is taken from `base` (the default row), or is an error for the default row itself. */
function limitsOf(row: Record<string, unknown>, field: string, base?: SiteLimits): SiteLimits {
  const pick = <T>(key: (typeof LIMIT_KEYS)[number], read: (v: unknown, f: string) => T, fallback: T | undefined): T => {
    if (row[key] !== undefined) return read(row[key], `${field}.${key}`);
    if (fallback === undefined) throw new ShapingError(`${field}.${key}: missing`);
    return fallback;
  };
  return {
    connections: pick('connections', wholeNumber, base?.connections),
    messagesPerConnection: pick('messagesPerConnection', wholeNumber, base?.messagesPerConnection),
    perMinute: pick('perMinute', wholeNumber, base?.perMinute),
    suspendMinutes: pick('suspendMinutes', wholeNumber, base?.suspendMinutes),
    suspendOn: pick('suspendOn', texts, base?.suspendOn),
  };
}

function patternsOf(v: unknown, field: string): string[] {
  const list = texts(v, field);
  if (list.length === 0) throw new ShapingError(`${field}: expected at least one host pattern`);
  return list.map((p, i) => {
    const pattern = normalHost(p);
    if (!HOST.test(pattern.startsWith('*.') ? pattern.slice(2) : pattern)) {
      throw new ShapingError(`${field}[${i}]: expected a host name, or "*." and a host name`);
    }
    return pattern;
  });
}

function shapingOf(value: unknown): Shaping {
  if (!isObject(value)) throw new ShapingError('(file): expected an object with "default" and "sites"');
  checkKeys(value, '(file)', ['default', 'sites', ...NOTE_KEYS]);
  if (!isObject(value.default)) throw new ShapingError('default: expected an object');
  checkKeys(value.default, 'default', [...LIMIT_KEYS, ...NOTE_KEYS]);
  const base = limitsOf(value.default, 'default');
  const rows = value.sites ?? [];
  if (!Array.isArray(rows)) throw new ShapingError('sites: expected a list');
  const names = new Set<string>();
  const sites = rows.map((row: unknown, i): SiteRule => {
    const field = `sites[${i}]`;
    if (!isObject(row)) throw new ShapingError(`${field}: expected an object`);
    checkKeys(row, field, ['name', 'mx', ...LIMIT_KEYS, ...NOTE_KEYS]);
    const name = row.name;
    if (typeof name !== 'string' || name.trim() === '') throw new ShapingError(`${field}.name: expected a non-empty text`);
    // The name is the site's key for connection pools and suspensions: two rows under one name would share them.
    if (names.has(name)) throw new ShapingError(`${field}.name: "${name}" is already the name of another site`);
    names.add(name);
    return { name, mx: patternsOf(row.mx, `${field}.mx`), ...limitsOf(row, field, base) };
  });
  return { default: base, sites };
}

/** Reads a shaping file's text; throws ShapingError naming the bad field. */
export function parseShaping(text: string): Shaping {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ShapingError(`(file): not JSON (${(e as Error).message})`);
  }
  return shapingOf(value);
}

/** The shipped rules (default-shaping.json), checked once at load like an operator's file. */
export const DEFAULT_SHAPING: Shaping = shapingOf(defaultShaping);

function matches(pattern: string, host: string): boolean {
  return pattern.startsWith('*.') ? host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1 : host === pattern;
}

/**
 * The site a destination belongs to, given its MX hosts most preferred first: the named site whose
 * pattern matches the most-preferred host (key = its name), or else the MX set itself (key = the
 * hosts lower-cased, de-duplicated, sorted, joined by ","; so domains sharing an MX set share a
 * key, whatever order DNS lists them in) with the default row.
 */
export function siteFor(shaping: Shaping, mxHosts: string[]): { key: string; limits: SiteLimits } {
  const hosts = mxHosts.map(normalHost);
  const first = hosts[0];
  if (first !== undefined) {
    const rule = shaping.sites.find((s) => s.mx.some((p) => matches(p, first)));
    if (rule) {
      const { name, mx: _mx, ...limits } = rule;
      return { key: name, limits };
    }
  }
  return { key: [...new Set(hosts)].sort().join(','), limits: shaping.default };
}

/**
 * Whether a reply means the site is throttling this source IP, so the site should be left alone for
 * `suspendMinutes` rather than each queued message burning a retry on it: always a 421 (the server
 * is closing the channel, RFC 5321 §4.2.2); any other 4xx whose text contains one of `suspendOn`
 * (case-insensitive). Never a 2xx, a 5xx (permanent: the message bounces, it does not wait) or no
 * reply at all (a network error says nothing about rate).
 */
export function suspends(limits: SiteLimits, code: number | null, reply: string): boolean {
  if (code === null || code < 400 || code > 499) return false;
  if (code === 421) return true;
  const text = reply.toLowerCase();
  return limits.suspendOn.some((s) => text.includes(s.toLowerCase()));
}
