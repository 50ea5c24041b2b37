import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import pino from 'pino';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';
import type { StsPolicies } from '../../activities/delivery/mta-sts-source';
import type { OutgoingMessage } from '../../activities/mailer';
import type { Clock } from '../../core/clock';
import type { StsPolicy } from '../../core/delivery/mta-sts';
import { DEFAULT_SHAPING, type Shaping, type SiteLimits } from '../../core/delivery/shaping';
import type { Issued } from './test-ca';

/** An SMTP reply a peer is scripted to give. */
export interface Reply {
  code: number;
  text: string;
}

/** Replies per stage; a function sees the recipient (RCPT) and the connecting address. Unset: accept. */
export interface PeerScript {
  /** Refuse the connection with this greeting instead of 220 (e.g. 421, 554). */
  greeting?: Reply;
  /** Extra wait before the greeting (smtp-server adds its own 100 ms). */
  greetingDelayMs?: number;
  mail?: (remote: string) => Reply | undefined;
  rcpt?: (rcpt: string, remote: string) => Reply | undefined;
  data?: (remote: string) => Reply | undefined;
}

/** STARTTLS: not offered, offered with this certificate, or offered with a handshake that cannot succeed. */
export type PeerTls = 'none' | Issued | { broken: Issued };

export interface PeerMessage {
  from: string;
  to: string[];
  raw: Buffer;
  /** The client's address as the peer saw it (the bound source address). */
  remoteAddress: string;
  /** The name the client gave in EHLO. */
  ehlo: string;
  /** Whether the transaction ran over TLS. */
  secure: boolean;
}

/**
 * Connections open at once, as the receiving side counts them: from accept until the client's
 * end of the socket is seen. One counter may be shared by the peers of one site.
 */
export class ConnectionCounter {
  open = 0;
  max = 0;
  total = 0;
  /** Messages carried by one connection, at most. */
  maxPerConnection = 0;
}

const replyError = (r: Reply) => Object.assign(new Error(r.text), { responseCode: r.code });
const answer = (r: Reply | undefined, cb: (err?: Error | null) => void) => (r ? cb(replyError(r)) : cb());

/** A scripted MX on one loopback address (127.0.0.x) and a port shared by the peers of a test. */
export class MxPeer {
  readonly received: PeerMessage[] = [];
  private readonly server: SMTPServer;
  private readonly perConnection = new Map<string, number>();

  constructor(
    readonly address: string,
    public script: PeerScript = {},
    tls: PeerTls = 'none',
    readonly counter = new ConnectionCounter(),
  ) {
    const cert = tls === 'none' ? null : 'broken' in tls ? tls.broken : tls;
    this.server = new SMTPServer({
      authOptional: true,
      disabledCommands: tls === 'none' ? ['AUTH', 'STARTTLS'] : ['AUTH'],
      hideSTARTTLS: tls === 'none',
      disableReverseLookup: true,
      logger: false,
      ...(cert ? { key: cert.key, cert: cert.cert } : {}),
      // Nothing a client with TLS 1.2 as its floor can agree to: the handshake itself fails.
      ...(tls !== 'none' && 'broken' in tls ? { minVersion: 'TLSv1', maxVersion: 'TLSv1.1' } : {}),
      onConnect: (session, cb) => {
        const go = () => answer(this.script.greeting, cb);
        if (this.script.greetingDelayMs) setTimeout(go, this.script.greetingDelayMs);
        else go();
      },
      onMailFrom: (_a, session, cb) => answer(this.script.mail?.(remote(session)), cb),
      onRcptTo: (a, session, cb) => answer(this.script.rcpt?.(a.address.toLowerCase(), remote(session)), cb),
      onData: (stream, session, cb) => {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          const refusal = this.script.data?.(remote(session));
          if (refusal) return cb(replyError(refusal));
          const n = (this.perConnection.get(session.id) ?? 0) + 1;
          this.perConnection.set(session.id, n);
          this.counter.maxPerConnection = Math.max(this.counter.maxPerConnection, n);
          this.received.push({
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
            raw: Buffer.concat(chunks),
            remoteAddress: remote(session),
            ehlo: session.hostNameAppearsAs,
            secure: session.secure,
          });
          cb();
        });
      },
    } as ConstructorParameters<typeof SMTPServer>[0]);
    this.server.on('error', () => undefined);
    this.server.server.on('connection', (socket: Socket) => {
      const c = this.counter;
      c.open += 1;
      c.total += 1;
      c.max = Math.max(c.max, c.open);
      let counted = true;
      const gone = () => {
        if (counted) c.open -= 1;
        counted = false;
      };
      socket.once('end', gone);
      socket.once('close', gone);
    });
  }

  /** Connections this peer accepted. */
  get connections(): number {
    return this.counter.total;
  }

  start(port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.server.once('error', reject);
      this.server.listen(port, this.address, () => resolve());
    });
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const remote = (session: SMTPServerSession) => session.remoteAddress.replace(/^::ffff:/, '');

/** A stand-in for the MTA-STS policy source: policies a test sets, refreshes and reports recorded. */
export class FakePolicies implements StsPolicies {
  readonly policies = new Map<string, StsPolicy | null>();
  /** What refresh(domain) finds (default: the same policy). */
  readonly onRefresh = new Map<string, StsPolicy | null>();
  readonly refreshed: string[] = [];
  readonly reports: { domain: string; ok: boolean }[] = [];

  async policyFor(domain: string): Promise<StsPolicy | null> {
    return this.policies.get(domain) ?? null;
  }
  async refresh(domain: string): Promise<StsPolicy | null> {
    this.refreshed.push(domain);
    if (this.onRefresh.has(domain)) this.policies.set(domain, this.onRefresh.get(domain) ?? null);
    return this.policies.get(domain) ?? null;
  }
  report(domain: string, ok: boolean): void {
    this.reports.push({ domain, ok });
  }
  async flush(): Promise<void> {}
}

/** A clock a test moves by hand. */
export class StepClock implements Clock {
  constructor(private t = new Date('2026-12-11T10:00:00Z')) {}
  now(): Date {
    return new Date(this.t);
  }
  advance(ms: number): void {
    this.t = new Date(this.t.getTime() + ms);
  }
}

/** Shaping with only the default row, these limits changed. */
export function shapingWith(limits: Partial<SiteLimits> = {}): Shaping {
  return { default: { ...DEFAULT_SHAPING.default, ...limits }, sites: [] };
}

export const silentLog: Logger = pino({ level: 'silent' });

/** A one-part message from `from` to these envelope recipients (each also in To). */
export function directMessage(to: string[], from = 'bounce+x@sender.test', extra: Partial<OutgoingMessage> = {}): OutgoingMessage {
  return {
    messageId: `<${Math.random().toString(36).slice(2)}@sender.test>`,
    from: { name: 'Sender', address: 'news@sender.test' },
    to: to.map((address) => ({ name: null, address })),
    cc: [],
    bcc: [],
    replyTo: null,
    subject: 'Direct',
    html: null,
    text: 'hello',
    headers: {},
    attachments: [],
    envelope: { from, to },
    date: new Date(),
    ...extra,
  };
}
