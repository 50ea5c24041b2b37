import os from 'node:os';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from 'smtp-server';
import { simpleParser } from 'mailparser';
import type { Logger } from 'pino';
import { senderDomainAllowed } from '../db/sql/sender-domain';
import { authenticate, invalidKey, type AuthKey } from '../core/auth';
import { ServiceError } from '../core/errors';
import { hashToken, TOKEN_RE } from '../core/tokens';
import { parseAddrSpec } from '../core/emails/address';
import { submit, type SubmitDeps } from '../core/emails/submit';
import { mimeToSend, SenderMismatch, Unparseable } from './mime-to-send';
import { OWN_ENHANCED_STATUS, RELAY_REPLIES, replyError, replyForError } from './replies';
import type { TlsPair } from './tls';

export interface RelayOptions {
  /** Submission port (STARTTLS offered); 0 picks a free one. */
  port: number;
  /** Implicit-TLS port, or null for none. */
  tlsPort: number | null;
  host: string;
  tls: TlsPair;
  allowInsecureAuth: boolean;
  maxConnectionsPerKey: number;
  idleSeconds: number;
  /** Largest message accepted (advertised as SIZE): the API's body limit. */
  maxMessageBytes: number;
}

export interface RelayDeps extends SubmitDeps {
  log: Logger;
}

/** What an authenticated session carries: the key, and its token's hash for the store statement. */
interface RelayUser {
  key: AuthKey;
  tokenHash: string;
  /** Sender domains MAIL FROM found allowed on this connection: asked once each (the store statement still decides). */
  senders: Set<string>;
}

/** The spec's recipient limit: RCPT beyond it answers 452 4.5.3. */
const MAX_RCPT = 50;
/**
 * Connections one listener holds at once, authenticated or not (beyond: 421). Each may hold a
 * message of up to SIZE in memory while it is parsed, so this bounds the relay's memory too.
 */
const MAX_CLIENTS = 200;

/**
 * The SMTP relay: a second ingress to the one send path. A message it accepts is the `POST
 * /emails` of its key, same checks, limits, rate and log row (source `smtp`); docs/smtp.md holds
 * the reply table and the mapping (smtp/mime-to-send.ts).
 */
export class SmtpRelay {
  private servers: SMTPServer[] = [];
  port = 0;
  tlsPort: number | null = null;

  constructor(
    private readonly deps: RelayDeps,
    private readonly opts: RelayOptions,
  ) {}

  async start(): Promise<void> {
    this.port = await this.listen(this.server(false), this.opts.port);
    if (this.opts.tlsPort !== null) this.tlsPort = await this.listen(this.server(true), this.opts.tlsPort);
  }

  async stop(): Promise<void> {
    await Promise.all(this.servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    this.servers = [];
  }

  private async listen(server: SMTPServer, port: number): Promise<number> {
    this.servers.push(server);
    await new Promise<void>((resolve, reject) => {
      server.server.once('error', reject);
      server.listen(port, this.opts.host, () => resolve());
    });
    server.on('error', (err) => this.deps.log.warn({ err }, 'smtp relay connection error'));
    return (server.server.address() as AddressInfo).port;
  }

  private server(implicitTls: boolean): SMTPServer {
    const options: SMTPServerOptions = {
      secure: implicitTls,
      key: this.opts.tls.key,
      cert: this.opts.tls.cert,
      name: os.hostname(),
      banner: 'svc SMTP relay',
      authMethods: ['PLAIN', 'LOGIN'],
      allowInsecureAuth: this.opts.allowInsecureAuth,
      authRequiredMessage: `${RELAY_REPLIES.authRequired.enhanced} ${RELAY_REPLIES.authRequired.text}`,
      hideENHANCEDSTATUSCODES: false,
      size: this.opts.maxMessageBytes,
      rejectOversized: true,
      maxRecipients: MAX_RCPT,
      maxClients: MAX_CLIENTS,
      socketTimeout: this.opts.idleSeconds * 1000,
      disabledCommands: [],
      logger: false,
      // No reverse DNS for the greeting: clients are applications, and a slow resolver would stall every connection.
      disableReverseLookup: true,
      onConnect: (session, cb) => {
        ownReplyCodes(server, session);
        cb();
      },
      onAuth: (auth, session, cb) => {
        this.authenticate(auth.password ?? '', session).then(
          (user) => cb(null, { user }),
          (err: Error) => cb(err),
        );
      },
      onMailFrom: (address, session, cb) => {
        this.checkSender(address.address, session.user as RelayUser).then(
          () => cb(),
          (err: Error) => cb(err),
        );
      },
      onRcptTo: (address, _session, cb) => {
        cb(parseAddrSpec(address.address) === null ? replyError(RELAY_REPLIES.badRecipient) : undefined);
      },
      onData: (stream, session, cb) => {
        const chunks: Buffer[] = [];
        // Past SIZE the rest is read and dropped, never held.
        stream.on('data', (c: Buffer) => stream.sizeExceeded || chunks.push(c));
        stream.on('end', () => {
          // Over SIZE: smtp-server itself answers 552 5.3.4 and the message is dropped.
          if (stream.sizeExceeded) return cb();
          this.accept(Buffer.concat(chunks), session).then(
            (text) => cb(null, text),
            (err: Error) => cb(err),
          );
        });
      },
    };
    const server = new SMTPServer(options);
    return server;
  }

  /** AUTH: the password is an API key (any tier); the username is not checked (docs say `svc`). */
  private async authenticate(password: string, session: SMTPServerSession): Promise<RelayUser> {
    if (!TOKEN_RE.test(password)) throw replyError(replyForError(invalidKey()));
    const tokenHash = hashToken(password);
    let key: AuthKey;
    try {
      // Cost 0: only whether the key is live. Each message is charged as it is stored.
      key = (await authenticate(this.deps.orm, tokenHash, 0, false)).auth.key;
    } catch (err) {
      throw this.refusal(err, 'auth');
    }
    // Counted from the live connections, and the session marked in the same synchronous step: a
    // closed connection can never stay counted, and two AUTHs at once cannot both take the last slot.
    if (this.connectionsOf(key.id) >= this.opts.maxConnectionsPerKey) throw replyError(RELAY_REPLIES.tooManyConnections);
    const user: RelayUser = { key, tokenHash, senders: new Set() };
    session.user = user;
    return user;
  }

  /** Authenticated connections of a key, on every port. */
  private connectionsOf(keyId: string): number {
    let n = 0;
    for (const server of this.servers) {
      for (const c of server.connections) if ((c.session.user as RelayUser | undefined)?.key?.id === keyId) n++;
    }
    return n;
  }

  /** MAIL FROM: the domain must be one the key may send from, told now rather than after DATA. */
  private async checkSender(address: string, user: RelayUser): Promise<void> {
    const domain = parseAddrSpec(address)?.domain;
    if (domain !== undefined && user.senders.has(domain)) return;
    let allowed = false;
    try {
      if (domain !== undefined) allowed = await senderDomainAllowed(this.deps.orm, user.key.organizationId, domain, user.key.domainIds);
    } catch (err) {
      throw this.refusal(err, 'mail-from');
    }
    if (allowed) user.senders.add(domain!);
    else {
      throw replyError(
        replyForError(
          new ServiceError(
            'domain_not_verified',
            'the MAIL FROM domain is not a verified domain of this organization allowed for this key',
          ),
        ),
      );
    }
  }

  /** DATA: parse, map, and accept through the one send path; answers the 250 text. */
  private async accept(raw: Buffer, session: SMTPServerSession): Promise<string> {
    const user = session.user as RelayUser;
    try {
      const mail = await simpleParser(raw, { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true });
      const envelope = {
        mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
        rcptTo: session.envelope.rcptTo.map((r) => r.address),
      };
      const send = mimeToSend(mail, envelope, user.key.id);
      // Exactly what POST /emails stores for the same body and key (source `smtp`).
      const [result] = await submit(this.deps, {
        credentials: { tokenHash: user.tokenHash },
        organizationId: user.key.organizationId,
        items: { one: send.body, envelope: send.envelope },
        payment: 'request',
        source: 'smtp',
        partsByRecipients: send.keyFromMessageId,
      });
      if (result instanceof ServiceError) throw result;
      const suppressed = result.suppressed.length ? `; suppressed: ${result.suppressed.join(', ')}` : '';
      return `${result.replayed ? 'Ok: already accepted as' : 'Ok: queued as'} ${result.id}${suppressed}`;
    } catch (err) {
      throw this.refusal(err, 'data');
    }
  }

  /** The reply for a refusal; anything that is not the client's doing is logged and answered 451. */
  private refusal(err: unknown, stage: 'auth' | 'mail-from' | 'data'): Error {
    if (err instanceof ServiceError) return replyError(replyForError(err));
    if (err instanceof SenderMismatch) return replyError(RELAY_REPLIES.senderMismatch);
    if (err instanceof Unparseable) return replyError(RELAY_REPLIES.unparseable);
    const errorId = randomUUID();
    this.deps.log.error({ err, errorId, stage }, 'smtp relay fault');
    return replyError(replyForError(new ServiceError('internal_error', `temporary fault; retry later (error id ${errorId})`)));
  }
}

/**
 * smtp-server picks an enhanced status code by reply code alone (550 → 5.1.1). The relay's replies
 * carry their own in the text (smtp/replies.ts), so they are sent as written; the library's own
 * 538 (AUTH before STARTTLS) gets 5.7.11, "encryption required" (RFC 5248's registry).
 */
function ownReplyCodes(server: SMTPServer, session: SMTPServerSession): void {
  for (const connection of server.connections) {
    if (connection.id !== session.id) continue;
    const send = connection.send.bind(connection);
    connection.send = (code, data, context) => {
      if (typeof data === 'string' && OWN_ENHANCED_STATUS.test(data)) return send(code, data, false);
      if (code === RELAY_REPLIES.startTlsFirst.code) {
        return send(code, `${RELAY_REPLIES.startTlsFirst.enhanced} ${RELAY_REPLIES.startTlsFirst.text}`, false);
      }
      return send(code, data, context);
    };
  }
}
