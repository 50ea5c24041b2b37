/**
 * The loopback Internet of the direct-delivery phase (bench/direct.ts): a DNS server publishing
 * `count` sites, siteN.bench with MX mx.siteN.bench at 127.0.0.(41+N), and on each of those
 * addresses an SMTP server that accepts every message and counts it, the connections it holds at
 * once and the messages each connection carried: what a site's limits (core/delivery/shaping.ts)
 * bound. All of them on one port, as every real MX is on 25 (SMTP_DIRECT_PORT).
 */
import { Resolver } from 'node:dns/promises';
import dns2 from 'dns2';
import { SMTPServer } from 'smtp-server';

const { Packet } = dns2;

/** One site's MX as it saw the run. */
export interface SiteSink {
  domain: string;
  mx: string;
  address: string;
  messages: number;
  /** Connections open at once, at most. */
  maxConnections: number;
  /** Messages carried by one connection, at most. */
  maxPerConnection: number;
  /** Connections open now. */
  open(): number;
  /** Starts counting afresh (between the warm-up and the measured rounds). */
  reset(): void;
}

export interface Sites {
  /** The SMTP port every site's MX listens on. */
  port: number;
  /** A resolver asking only the bench's DNS server. */
  resolver: Resolver;
  sites: SiteSink[];
  delivered(): number;
  /** Resolves once no site holds a connection (a closed mailer's sockets end asynchronously). */
  quiet(): Promise<void>;
  close(): Promise<void>;
}

/** The first site's address: 127.0.0.41, then .42 and so on (other phases and tests use lower ones). */
const FIRST_OCTET = 41;

/** A DNS server on loopback answering MX and A for the sites (UDP: every answer is small). */
async function siteDns(mx: Map<string, string>, a: Map<string, string>) {
  const server = dns2.createServer({
    udp: true,
    handle: (request, send) => {
      const response = Packet.createResponseFromRequest(request);
      const [q] = request.questions;
      const name = q.name.toLowerCase().replace(/\.$/, '');
      const exchange = mx.get(name);
      const address = a.get(name);
      if (q.type === Packet.TYPE.MX && exchange) {
        response.answers.push({ name: q.name, type: Packet.TYPE.MX, class: Packet.CLASS.IN, ttl: 300, exchange, priority: 10 } as never);
      } else if (q.type === Packet.TYPE.A && address) {
        response.answers.push({ name: q.name, type: Packet.TYPE.A, class: Packet.CLASS.IN, ttl: 300, address } as never);
      }
      send(response);
    },
  });
  const { udp } = (await server.listen({ udp: { port: 0, address: '127.0.0.1' } } as never)) as { udp: { port: number } };
  return { port: udp.port, close: () => server.close() };
}

/** An MX on `address`:`port` that accepts and counts; `port` 0 picks a free one. */
async function siteSink(domain: string, mx: string, address: string, port: number): Promise<{ sink: SiteSink; server: SMTPServer }> {
  let open = 0;
  const perSession = new Map<string, number>();
  const sink: SiteSink = {
    domain,
    mx,
    address,
    messages: 0,
    maxConnections: 0,
    maxPerConnection: 0,
    open: () => open,
    reset() {
      this.messages = 0;
      this.maxConnections = open;
      this.maxPerConnection = 0;
    },
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onConnect: (_session, cb) => {
      open += 1;
      sink.maxConnections = Math.max(sink.maxConnections, open);
      cb();
    },
    onClose: (session) => {
      open -= 1;
      perSession.delete(session.id);
    },
    onData: (stream, session, cb) => {
      stream.resume();
      stream.on('end', () => {
        sink.messages += 1;
        const carried = (perSession.get(session.id) ?? 0) + 1;
        perSession.set(session.id, carried);
        sink.maxPerConnection = Math.max(sink.maxPerConnection, carried);
        cb();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, address, () => resolve());
  });
  return { sink, server };
}

/** `count` sites on loopback and a resolver that finds them. */
export async function startSites(count: number): Promise<Sites> {
  const mx = new Map<string, string>();
  const a = new Map<string, string>();
  const servers: SMTPServer[] = [];
  const sites: SiteSink[] = [];
  let port = 0;
  for (let i = 0; i < count; i++) {
    const domain = `site${i}.bench`;
    const host = `mx.${domain}`;
    const address = `127.0.0.${FIRST_OCTET + i}`;
    mx.set(domain, host);
    a.set(host, address);
    // The first one picks a free port; the others take the same one on their own address.
    const s = await siteSink(domain, host, address, port);
    if (port === 0) port = (s.server.server.address() as { port: number }).port;
    servers.push(s.server);
    sites.push(s.sink);
  }
  const dns = await siteDns(mx, a);
  const resolver = new Resolver({ timeout: 3000, tries: 2 });
  resolver.setServers([`127.0.0.1:${dns.port}`]);
  return {
    port,
    resolver,
    sites,
    delivered: () => sites.reduce((sum, s) => sum + s.messages, 0),
    async quiet() {
      const deadline = Date.now() + 10_000;
      while (sites.some((s) => s.open() > 0)) {
        if (Date.now() > deadline) throw new Error('direct: a closed mailer left connections open for 10 s');
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    async close() {
      await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
      await dns.close();
    },
  };
}
