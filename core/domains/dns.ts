import { Resolver } from 'node:dns/promises';
import type { DnsRecord } from '../../db/entities';
import type { Lookup } from './identity';
import { queryTxtTtl } from './dns-ttl';

/** The lookups domain verification needs; tests point it at a DNS server on loopback. */
export interface DnsResolver {
  resolveTxt(name: string): Promise<string[][]>;
  resolveMx(name: string): Promise<{ exchange: string; priority: number }[]>;
  resolveCname(name: string): Promise<string[]>;
  /** The TTL (seconds) of the TXT record at the name, as the first resolver answers it; null when it has none. */
  txtTtl?(name: string): Promise<number | null>;
}

/** DNS_SERVERS (`host` or `host:port`, comma-separated) or the system's resolvers. */
export function createDnsResolver(servers: string[] | undefined): DnsResolver {
  const r = new Resolver({ timeout: 3000, tries: 2 });
  if (servers?.length) r.setServers(servers);
  return Object.assign(r, { txtTtl: (name: string) => queryTxtTtl(r.getServers(), name) });
}

/** One record's lookup; any failure reads as "nothing there" and the next round tries again. */
export async function lookup(dns: DnsResolver, record: DnsRecord): Promise<Lookup> {
  try {
    if (record.type === 'MX') return { mx: await dns.resolveMx(record.name) };
    if (record.type === 'CNAME') return { cname: await dns.resolveCname(record.name) };
    // A TXT record may arrive in 255-byte chunks; they form one string.
    return { txt: (await dns.resolveTxt(record.name)).map((chunks) => chunks.join('')) };
  } catch {
    return { error: 'missing' };
  }
}
