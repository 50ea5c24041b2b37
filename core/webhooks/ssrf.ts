import net from 'node:net';

/**
 * Where a webhook may not connect: loopback, private, link-local, CGNAT, multicast, reserved and
 * cloud metadata addresses (IPv4, IPv6, and IPv4 inside IPv6). Checked on the address actually
 * connected to, after DNS, on every connection (activities/webhook-http.ts), and on literal
 * addresses at registration.
 */
const FORBIDDEN = new net.BlockList();
for (const [net4, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  FORBIDDEN.addSubnet(net4, prefix, 'ipv4');
}
for (const [net6, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
  ['fd00:ec2::254', 128],
] as const) {
  FORBIDDEN.addSubnet(net6, prefix, 'ipv6');
}

/** True when a connection to this IP address must be refused. */
export function isForbiddenAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 0) return true;
  if (family === 6) {
    const lower = address.toLowerCase();
    // IPv4-mapped (::ffff:a.b.c.d) and -compatible forms are judged as the IPv4 address they carry.
    const v4 = /^(?:::ffff:|::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower)?.[1];
    if (v4) return isForbiddenAddress(v4);
    const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
    if (mapped) {
      const n = (parseInt(mapped[1], 16) << 16) | parseInt(mapped[2], 16);
      return isForbiddenAddress([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.'));
    }
    return FORBIDDEN.check(address, 'ipv6');
  }
  return FORBIDDEN.check(address, 'ipv4');
}

export interface UrlPolicy {
  /** WEBHOOK_ALLOW_HTTP: plain http allowed (development). */
  allowHttp: boolean;
  /** WEBHOOK_ALLOW_PRIVATE: private and loopback addresses allowed (tests, development). */
  allowPrivate: boolean;
}

/**
 * Why a webhook URL is refused at registration, or null when it may be registered: an absolute
 * https URL (http only when allowed) without credentials, whose host, if a literal address, is
 * not forbidden. A host name is judged when connecting, since DNS may change.
 */
export function urlProblem(raw: string, policy: UrlPolicy): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'url must be an absolute URL';
  }
  if (url.protocol !== 'https:' && !(policy.allowHttp && url.protocol === 'http:')) {
    return policy.allowHttp ? 'url must use https or http' : 'url must use https';
  }
  if (url.username || url.password) return 'url must not carry credentials';
  if (!url.hostname) return 'url must name a host';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!policy.allowPrivate && net.isIP(host) && isForbiddenAddress(host)) {
    return 'url points at a private, loopback, link-local or metadata address';
  }
  if (!policy.allowPrivate && (host === 'localhost' || host.endsWith('.localhost'))) return 'url points at localhost';
  return null;
}
