import { SMTPServer } from 'smtp-server';
import { simpleParser, type ParsedMail } from 'mailparser';

export interface Received {
  envelopeFrom: string;
  envelopeTo: string[];
  raw: Buffer;
  parsed: ParsedMail;
}

/** How the sink answers RCPT TO for an address: accept, refuse for good, or refuse for now. */
export type Rule = { rcpt: 'accept' } | { rcpt: 'reject'; code: number; message: string } | { rcpt: 'tempfail'; times: number };

/**
 * A real SMTP server on loopback standing in for the outbound relay. Rules per recipient decide
 * the replies; `holdData` keeps the DATA reply pending so a test can kill a worker mid-send.
 */
export class SmtpSink {
  readonly received: Received[] = [];
  readonly rules = new Map<string, Rule>();
  private tempfails = new Map<string, number>();
  holdData = false;
  onDataStarted?: () => void;
  dataAttempts = 0;
  private server: SMTPServer;
  port = 0;

  constructor() {
    this.server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      onRcptTo: (address, _session, cb) => {
        const rule = this.rules.get(address.address.toLowerCase());
        if (rule?.rcpt === 'reject') {
          const err = new Error(rule.message) as Error & { responseCode: number };
          err.responseCode = rule.code;
          return cb(err);
        }
        if (rule?.rcpt === 'tempfail') {
          const n = this.tempfails.get(address.address) ?? 0;
          if (n < rule.times) {
            this.tempfails.set(address.address, n + 1);
            const err = new Error('4.2.0 mailbox busy, try later') as Error & { responseCode: number };
            err.responseCode = 451;
            return cb(err);
          }
        }
        cb();
      },
      onData: (stream, session, cb) => {
        this.dataAttempts += 1;
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', async () => {
          if (this.holdData) {
            this.onDataStarted?.();
            // Never answer: the connection dies with the worker, so the message is not accepted.
            return;
          }
          const raw = Buffer.concat(chunks);
          this.received.push({
            envelopeFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            envelopeTo: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
            raw,
            parsed: await simpleParser(raw),
          });
          cb();
        });
      },
    });
  }

  /** On `host` (a 127.0.0.x alias: an MX of direct delivery) and `port` (0: a free one). */
  async start(port = 0, host = '127.0.0.1'): Promise<string> {
    // A client killed mid-transaction (the crash tests) resets its connection: that is the
    // client's fault to recover from, not the sink's, so it must not end the test process.
    this.server.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'ECONNRESET' && err.code !== 'EPIPE') throw err;
    });
    await new Promise<void>((resolve) => this.server.listen(port, host, () => resolve()));
    this.port = (this.server.server.address() as { port: number }).port;
    return `smtp://${host}:${this.port}`;
  }

  byMessageId(messageId: string): Received[] {
    return this.received.filter((r) => r.parsed.messageId === messageId);
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
