import os from 'node:os';
import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerSession } from 'smtp-server';
import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { knownReturnPathHost, storeInbound } from '../db/sql/inbound-messages';
import { parseAddrSpec } from '../core/emails/address';
import { verpTokenOf, type ReturnPaths } from '../core/bounces/verp';
import { COMPLAINTS_LOCAL_PART, DMARC_REPORTS_LOCAL_PART } from '../core/bounces/apply';
import { INBOUND_REPLIES, replyError } from './replies';
import type { TlsPair } from './tls';

export interface InboundOptions {
  /** INBOUND_SMTP_PORT; 0 picks a free one. */
  port: number;
  host: string;
  /** Largest message taken (advertised as SIZE): returned mail quotes at most the original. */
  maxMessageBytes: number;
  /** Offered with STARTTLS when given (the relay's pair). */
  tls: TlsPair | null;
  idleSeconds: number;
}

export interface InboundDeps {
  orm: Orm;
  returnPaths: ReturnPaths;
  log: Logger;
  /** Called after a message is stored: the processor takes it from there. */
  stored: () => void;
}

/** Connections the listener holds at once (beyond: 421); each may hold one message in memory. */
const MAX_CLIENTS = 100;
/** One returned message names one recipient; a few more allow a report copied to complaints@ too. */
const MAX_RCPT = 10;

/**
 * The inbound listener (the MX of every return-path host): takes mail only for
 * `bounces+<token>@<host>` with a valid token, `complaints@<host>` and `dmarc-reports@<host>`
 * (DMARC aggregate reports, core/dmarc/ingest.ts), where `<host>` is the
 * return-path host of a live domain; anything else is refused at RCPT with 550 5.1.1. A message
 * is stored before the 250, so an accepted message is never lost; InboundProcessor applies it.
 */
export class InboundListener {
  private server?: SMTPServer;
  port = 0;

  constructor(
    private readonly deps: InboundDeps,
    private readonly opts: InboundOptions,
  ) {}

  async start(): Promise<void> {
    const { opts, deps } = this;
    const server = new SMTPServer({
      name: os.hostname(),
      banner: 'svc bounce and feedback listener',
      authOptional: true,
      disabledCommands: opts.tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
      ...(opts.tls ? { key: opts.tls.key, cert: opts.tls.cert } : {}),
      // The replies carry their own enhanced codes in the text (5.1.1 ...).
      hideENHANCEDSTATUSCODES: true,
      size: opts.maxMessageBytes,
      rejectOversized: true,
      maxClients: MAX_CLIENTS,
      socketTimeout: opts.idleSeconds * 1000,
      closeTimeout: 5000,
      logger: false,
      onRcptTo: (address, session, cb) => {
        if (session.envelope.rcptTo.length >= MAX_RCPT) return cb(replyError(INBOUND_REPLIES.tooManyRecipients));
        this.acceptRecipient(address.address, session).then(
          () => cb(),
          (err: Error) => cb(err),
        );
      },
      onData: (stream, session, cb) => {
        const chunks: Buffer[] = [];
        // Past SIZE the rest is read and dropped, never held; smtp-server answers 552 5.3.4.
        stream.on('data', (c: Buffer) => stream.sizeExceeded || chunks.push(c));
        stream.on('end', () => {
          if (stream.sizeExceeded) return cb();
          storeInbound(deps.orm, {
            remoteAddress: session.remoteAddress ?? null,
            mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : null,
            rcptTo: session.envelope.rcptTo.map((r) => r.address),
            raw: Buffer.concat(chunks),
          }).then(
            (id) => {
              deps.stored();
              cb(null, `2.0.0 stored as ${id}`);
            },
            (err: Error) => {
              deps.log.error({ err, errorId: 'inbound_store_failed' }, 'could not store a returned message; the sender retries');
              cb(replyError(INBOUND_REPLIES.storeFailed));
            },
          );
        });
      },
    });
    server.on('error', (err) => deps.log.warn({ err, errorId: 'inbound_connection_error' }, 'inbound SMTP connection error'));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.server.once('error', reject);
      server.listen(opts.port, opts.host, () => resolve());
    });
    this.port = (server.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Known host, and a signed token, the complaints or the DMARC reports address; a forged token is logged and refused. */
  private async acceptRecipient(address: string, session: SMTPServerSession): Promise<void> {
    const spec = parseAddrSpec(address);
    if (!spec) throw replyError(INBOUND_REPLIES.unknownRecipient);
    const local = spec.normalized.slice(0, spec.normalized.lastIndexOf('@'));
    const host = spec.domain;
    const token = verpTokenOf(spec.normalized);
    if (token === null && local !== COMPLAINTS_LOCAL_PART && local !== DMARC_REPORTS_LOCAL_PART)
      throw replyError(INBOUND_REPLIES.unknownRecipient);
    if (!(await this.knownHost(host, session))) throw replyError(INBOUND_REPLIES.unknownRecipient);
    if (token !== null && this.deps.returnPaths.recipientOf(token) === null) {
      this.deps.log.warn(
        { errorId: 'inbound_forged_token', remoteAddress: session.remoteAddress },
        'RCPT to a bounce address with a forged token refused',
      );
      throw replyError(INBOUND_REPLIES.unknownRecipient);
    }
  }

  /** Asked once per host and connection: a report is usually one RCPT, a burst many connections. */
  private async knownHost(host: string, session: SMTPServerSession): Promise<boolean> {
    const cache = ((session as SMTPServerSession & { knownHosts?: Map<string, boolean> }).knownHosts ??= new Map());
    let known = cache.get(host);
    if (known === undefined) {
      known = await knownReturnPathHost(this.deps.orm, host);
      cache.set(host, known);
    }
    return known;
  }
}
