import tls from 'node:tls';
import SMTPConnection from 'nodemailer/lib/smtp-connection';

/**
 * How a connection treats TLS: `verify` requires STARTTLS with a certificate valid for the MX
 * host's name (MTA-STS enforce); `opportunistic` upgrades when offered, accepts any certificate and
 * goes on in plaintext if the server refuses the STARTTLS command; `plain` never upgrades (the one
 * retry after a failed handshake).
 */
export type TlsMode = 'verify' | 'opportunistic' | 'plain';

export interface SessionTarget {
  host: string;
  address: string;
  port: number;
  tls: TlsMode;
}

export interface SessionOptions {
  heloName: string;
  localAddress?: string;
  /** Extra trusted roots; without them Node's own (with NODE_EXTRA_CA_CERTS) are used. */
  ca?: string[];
}

/** A failure as nodemailer reports it: `code` (ETLS, ECONNECTION, EENVELOPE…) and the reply, when one came. */
export interface SessionError extends Error {
  code?: string;
  responseCode?: number;
  response?: string;
  rejectedErrors?: { recipient?: string; responseCode?: number; response?: string; message: string }[];
}

export interface Delivered {
  accepted: string[];
  rejectedErrors: NonNullable<SessionError['rejectedErrors']>;
  response: string;
}

// Short next to RFC 5321 §4.5.3.2's minutes: a message waits in memory for its turn, and a host
// that will not greet in a minute is better replaced by the next MX or the next attempt.
const TIMEOUTS = { connectionTimeout: 30_000, greetingTimeout: 60_000, socketTimeout: 300_000 };
// How long a socket may take to close after QUIT before it is destroyed (its slot waits for it).
const CLOSE_GRACE_MS = 5_000;

/**
 * One SMTP connection to one MX address, as a pool slot: `closed` settles once the socket is
 * gone, so a slot is only reused after the peer can no longer count the old connection.
 */
export class Session {
  messages = 0;
  /** After a TLS handshake: whether the certificate is valid for the host name (for TLS reports). */
  tlsVerified = false;
  readonly closed: Promise<void>;
  private ended = false;

  private constructor(
    readonly key: string,
    readonly target: SessionTarget,
    private readonly conn: SMTPConnection,
  ) {
    this.closed = new Promise<void>((resolve) => {
      conn.once('end', () => {
        this.ended = true;
        const socket = conn._socket;
        if (!socket || socket.closed) return resolve();
        const timer = setTimeout(() => {
          socket.destroy();
          resolve();
        }, CLOSE_GRACE_MS);
        timer.unref();
        socket.once('close', () => {
          clearTimeout(timer);
          resolve();
        });
      });
    });
    // Errors reach the callbacks of connect() and send(); an error between messages only ends the connection.
    conn.on('error', () => undefined);
  }

  get alive(): boolean {
    return !this.ended;
  }

  get secure(): boolean {
    return this.conn.secure;
  }

  static keyOf(t: SessionTarget): string {
    return `${t.host}|${t.address}|${t.tls}`;
  }

  /** A connected session, or why not with the promise of its socket's end (the slot is busy until then). */
  static open(target: SessionTarget, o: SessionOptions): Promise<{ session: Session } | { error: SessionError; closed: Promise<void> }> {
    const verify = target.tls === 'verify';
    const conn = new SMTPConnection({
      host: target.address,
      port: target.port,
      name: o.heloName,
      localAddress: o.localAddress,
      servername: target.host,
      requireTLS: verify,
      ignoreTLS: target.tls === 'plain',
      opportunisticTLS: target.tls === 'opportunistic',
      // Checked by hand after the handshake when not required, so TLS reports can still tell.
      tls: {
        servername: target.host,
        rejectUnauthorized: verify,
        minVersion: 'TLSv1.2',
        ...(o.ca ? { ca: [...tls.rootCertificates, ...o.ca] } : {}),
      },
      ...TIMEOUTS,
      logger: false,
    });
    const session = new Session(Session.keyOf(target), target, conn);
    return new Promise((resolve) => {
      let settled = false;
      // nodemailer reports a failed connection as an 'error' event, a silent close before the greeting to the callback.
      const fail = (error: SessionError) => {
        if (settled) return;
        settled = true;
        // A handshake refused by the socket (a certificate that does not verify) surfaces as a socket error: it is a TLS failure all the same.
        if (conn.upgrading && error.code !== 'ETLS') Object.assign(error, { originalCode: error.code, code: 'ETLS' });
        conn.close();
        resolve({ error, closed: session.closed });
      };
      conn.once('error', fail);
      conn.once('end', () => fail(Object.assign(new Error('connection closed'), { code: 'ECONNECTION' })));
      conn.connect((err) => {
        if (err) return fail(err);
        if (settled) return;
        settled = true;
        const socket = conn._socket;
        if (conn.secure && socket instanceof tls.TLSSocket) {
          const identity = tls.checkServerIdentity(target.host, socket.getPeerCertificate());
          session.tlsVerified = socket.authorized && identity === undefined;
        }
        resolve({ session });
      });
    });
  }

  /** One transaction; rejects with a SessionError when the server refused it as a whole. */
  send(envelope: { from: string; to: string[] }, raw: Buffer): Promise<Delivered> {
    this.messages += 1;
    return new Promise((resolve, reject) => {
      this.conn.send({ from: envelope.from, to: envelope.to, size: raw.length }, raw, (err, info) => {
        if (err || !info) return reject(err ?? new Error('no reply'));
        resolve({ accepted: info.accepted, rejectedErrors: info.rejectedErrors ?? [], response: info.response });
      });
    });
  }

  /** RSET after a refused transaction, so the connection can carry the next one. */
  reset(): Promise<boolean> {
    if (!this.alive) return Promise.resolve(false);
    return new Promise((resolve) => this.conn.reset((err) => resolve(!err)));
  }

  /** QUIT (or a plain close when the connection is already broken); settles once the socket is gone. */
  close(): Promise<void> {
    if (this.alive) {
      try {
        this.conn.quit();
      } catch {
        this.conn.close();
      }
      // A server that never answers QUIT must not hold the slot past the grace period.
      setTimeout(() => this.conn.close(), CLOSE_GRACE_MS).unref();
    }
    return this.closed;
  }
}
