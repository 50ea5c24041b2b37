import dns2 from 'dns2';
import { freePort } from './child';

const { Packet } = dns2;

/**
 * A real DNS server on loopback (UDP and TCP) answering TXT, MX and CNAME from a zone the test
 * edits, so domain verification and DKIM verification resolve exactly what a test published.
 */
export class TestDns {
  readonly txt = new Map<string, string[]>();
  readonly mx = new Map<string, { exchange: string; priority: number }[]>();
  /** Name → CNAME target, answered to CNAME questions (no chasing: the other types at the name stay as published). */
  readonly cname = new Map<string, string>();
  /** Name → IPv4 and IPv6 addresses (MX hosts, the A fallback, mta-sts.<domain> policy hosts). */
  readonly a = new Map<string, string[]>();
  readonly aaaa = new Map<string, string[]>();
  /** Name → the TTL (seconds) its TXT records are served with; 1 unless set. */
  readonly txtTtl = new Map<string, number>();
  /** Names answered SERVFAIL (a resolver failing for now). */
  readonly servfail = new Set<string>();
  /** Names answered NXDOMAIN (the name does not exist); others without records answer NOERROR, empty. */
  readonly nxdomain = new Set<string>();
  private server = dns2.createServer({
    udp: true,
    tcp: true,
    handle: (request, send) => {
      const response = Packet.createResponseFromRequest(request);
      const [q] = request.questions;
      const name = q.name.toLowerCase().replace(/\.$/, '');
      if (this.servfail.has(name)) {
        (response.header as { rcode: number }).rcode = 2;
      } else if (this.nxdomain.has(name)) {
        (response.header as { rcode: number }).rcode = 3;
      } else if (q.type === Packet.TYPE.A || q.type === Packet.TYPE.AAAA) {
        const [type, map] = q.type === Packet.TYPE.A ? [Packet.TYPE.A, this.a] : [Packet.TYPE.AAAA, this.aaaa];
        for (const address of map.get(name) ?? []) {
          response.answers.push({ name: q.name, type, class: Packet.CLASS.IN, ttl: 1, address } as never);
        }
      } else if (q.type === Packet.TYPE.TXT) {
        for (const value of this.txt.get(name) ?? []) {
          // TXT strings are at most 255 bytes each; long values (DKIM keys) go in several.
          const chunks = value.match(/.{1,255}/g) ?? [''];
          const ttl = this.txtTtl.get(name) ?? 1;
          response.answers.push({ name: q.name, type: Packet.TYPE.TXT, class: Packet.CLASS.IN, ttl, data: chunks } as never);
        }
      } else if (q.type === Packet.TYPE.MX) {
        for (const m of this.mx.get(name) ?? []) {
          response.answers.push({
            name: q.name,
            type: Packet.TYPE.MX,
            class: Packet.CLASS.IN,
            ttl: 1,
            exchange: m.exchange,
            priority: m.priority,
          } as never);
        }
      } else if (q.type === Packet.TYPE.CNAME) {
        const target = this.cname.get(name);
        if (target !== undefined) {
          // dns2 encodes a CNAME's target from `domain`.
          response.answers.push({ name: q.name, type: Packet.TYPE.CNAME, class: Packet.CLASS.IN, ttl: 1, domain: target } as never);
        }
      }
      send(response);
    },
  });
  port = 0;

  async start(): Promise<string> {
    // One port for UDP and TCP: a resolver retries a truncated answer over TCP on the same port.
    this.port = await freePort();
    await this.server.listen({ udp: { port: this.port, address: '127.0.0.1' }, tcp: { port: this.port, address: '127.0.0.1' } } as never);
    return `127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    await this.server.close();
  }
}
