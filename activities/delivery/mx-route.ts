import { isForbiddenAddress } from '../../core/webhooks/ssrf';

/** The DNS lookups direct delivery makes; node:dns/promises' Resolver fits (core/domains/dns.ts createDnsResolver). */
export interface DirectDns {
  resolveMx(n: string): Promise<{ exchange: string; priority: number }[]>;
  resolve4(n: string): Promise<string[]>;
  resolve6(n: string): Promise<string[]>;
  resolveTxt(n: string): Promise<string[][]>;
}

/** One MX host and the addresses to try on it, in order. */
export interface MxHost {
  name: string;
  priority: number;
  addresses: string[];
}

/** Where a domain's mail goes: hosts most preferred first, or why nowhere (code null: for now). */
export type Route = { hosts: MxHost[] } | { code: number | null; response: string };

const errCode = (e: unknown) => (e as { code?: string }).code;
// c-ares' answers: NOERROR without records is ENODATA, NXDOMAIN is ENOTFOUND.
const NO_RECORDS = 'ENODATA';
const NO_DOMAIN = 'ENOTFOUND';
const normal = (h: string) => h.toLowerCase().replace(/\.$/, '');

/**
 * The hosts in the order to try them for one message: RFC 5321 §5.1 asks senders to spread load
 * over MX hosts of equal preference at random, so each level is shuffled (Fisher-Yates) per call.
 */
export function spread(hosts: MxHost[]): MxHost[] {
  const out = [...hosts];
  for (let start = 0; start < out.length;) {
    let end = start;
    while (end < out.length && out[end].priority === out[start].priority) end += 1;
    for (let i = end - 1; i > start; i--) {
      const j = start + Math.floor(Math.random() * (i - start + 1));
      [out[i], out[j]] = [out[j], out[i]];
    }
    start = end;
  }
  return out;
}

/**
 * MX records by preference (names lower-cased, without the trailing dot, the first of duplicates
 * kept). Null when the domain publishes a null MX (RFC 7505: a single MX whose exchange is "."),
 * which Node reports as ''.
 */
export function orderMx(records: { exchange: string; priority: number }[]): { name: string; priority: number }[] | null {
  const real = records.map((r) => ({ name: normal(r.exchange), priority: r.priority })).filter((r) => r.name !== '');
  if (real.length === 0) return null;
  const seen = new Set<string>();
  return real.sort((a, b) => a.priority - b.priority).filter((r) => !seen.has(r.name) && seen.add(r.name));
}

/**
 * A host's addresses, IPv4 first: bulk senders' IPv6 mail meets stricter checks at the big
 * providers (Gmail requires PTR and authentication for it), and a host without IPv6 routing
 * would fail there first. Lookup errors count as no address: the host is skipped, not the domain.
 */
async function addressesOf(dns: DirectDns, name: string): Promise<{ addresses: string[]; failed: boolean }> {
  const [v4, v6] = await Promise.allSettled([dns.resolve4(name), dns.resolve6(name)]);
  const ok = (r: PromiseSettledResult<string[]>) => (r.status === 'fulfilled' ? r.value : []);
  const transient = (r: PromiseSettledResult<string[]>) =>
    r.status === 'rejected' && errCode(r.reason) !== NO_RECORDS && errCode(r.reason) !== NO_DOMAIN;
  return { addresses: [...ok(v4), ...ok(v6)], failed: transient(v4) || transient(v6) };
}

/**
 * RFC 5321 §5.1 routing for one recipient domain: its MX hosts by preference (ties: see spread); without MX records,
 * the domain itself as the implicit MX. Hosts whose every address is private, loopback or
 * link-local are dropped unless allowed (an MX is the recipient's to name, so it could aim us at
 * our own network).
 */
export async function resolveRoute(dns: DirectDns, domain: string, allowPrivate: boolean): Promise<Route> {
  let names: { name: string; priority: number }[] | null;
  try {
    names = orderMx(await dns.resolveMx(domain));
    if (names === null) return { code: 556, response: '5.1.10 null MX: the domain accepts no mail (RFC 7505)' };
  } catch (e) {
    if (errCode(e) === NO_DOMAIN) return { code: 550, response: '5.1.2 domain does not exist' };
    if (errCode(e) !== NO_RECORDS) return { code: null, response: `4.4.3 MX lookup failed (${errCode(e) ?? 'error'})` };
    names = [{ name: normal(domain), priority: 0 }];
  }
  const found = await Promise.all(names.map((n) => addressesOf(dns, n.name)));
  const failed = found.some((f) => f.failed);
  const hosts: MxHost[] = [];
  let forbidden = 0;
  for (const [i, { name, priority }] of names.entries()) {
    const all = found[i].addresses;
    const usable = allowPrivate ? all : all.filter((a) => !isForbiddenAddress(a));
    if (usable.length > 0) hosts.push({ name, priority, addresses: usable });
    else if (all.length > 0) forbidden += 1;
  }
  if (hosts.length > 0) return { hosts };
  if (failed) return { code: null, response: `4.4.3 address lookup failed for the MX hosts of ${domain}` };
  if (forbidden > 0) return { code: 550, response: '5.4.4 MX resolves only to private addresses' };
  // Every host (or the implicit one) exists without an address: nowhere to deliver, and DNS said so.
  return { code: 550, response: '5.1.2 no address for the mail hosts of the domain' };
}

/** How long a found route is reused: a burst to one domain would otherwise ask DNS once per message. */
export const ROUTE_TTL_MS = 60_000;

/**
 * resolveRoute with the answers shared: concurrent lookups of one domain share one, and a route
 * with hosts is kept ROUTE_TTL_MS (failures are asked again next time). Bounded by dropping the
 * oldest entry.
 */
export function routeCache(dns: DirectDns, allowPrivate: boolean, now: () => number, max = 10_000): (domain: string) => Promise<Route> {
  const kept = new Map<string, { at: number; route: Promise<Route> }>();
  return (domain) => {
    const hit = kept.get(domain);
    if (hit && now() - hit.at < ROUTE_TTL_MS) return hit.route;
    const route = resolveRoute(dns, domain, allowPrivate);
    kept.delete(domain);
    if (kept.size >= max) kept.delete(kept.keys().next().value!);
    kept.set(domain, { at: now(), route });
    void route.then((r) => {
      if (!('hosts' in r) && kept.get(domain)?.route === route) kept.delete(domain);
    });
    return route;
  };
}
