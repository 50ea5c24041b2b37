import net from 'node:net';
import tls from 'node:tls';

/**
 * A bare SMTP client for what nodemailer will not do (garbage after DATA, a 51st RCPT, AUTH on a
 * plain connection against a server that wants STARTTLS): each command answers the server's whole
 * reply, so tests read the exact codes.
 */
export class RawSmtp {
  private buffer = '';
  private waiting: { resolve: (reply: string) => void; reject: (err: Error) => void } | null = null;
  greeting!: string;

  private constructor(private socket: net.Socket) {
    this.attach(socket);
  }

  static async connect(port: number, opts: { implicitTls?: boolean } = {}): Promise<RawSmtp> {
    const socket = opts.implicitTls
      ? tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false })
      : net.connect({ port, host: '127.0.0.1' });
    const client = new RawSmtp(socket);
    client.greeting = await client.reply();
    return client;
  }

  private attach(socket: net.Socket) {
    // No setEncoding: the same socket carries TLS after STARTTLS, which needs its bytes raw.
    socket.on('data', (chunk: Buffer) => {
      this.buffer += chunk.toString('utf8');
      this.flush();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const w = this.waiting;
      this.waiting = null;
      w?.reject(new Error(`connection closed; unread: ${this.buffer}`));
    });
  }

  private flush() {
    // A reply ends with a line whose code is followed by a space (RFC 5321 4.2).
    const m = /(^|\r\n)\d{3} [^\r\n]*\r\n/.exec(this.buffer);
    if (!m || !this.waiting) return;
    const end = m.index + m[0].length;
    const reply = this.buffer.slice(0, end).trimEnd();
    this.buffer = this.buffer.slice(end);
    const w = this.waiting;
    this.waiting = null;
    w.resolve(reply);
  }

  private reply(): Promise<string> {
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.flush();
      if (this.waiting && this.socket.destroyed) reject(new Error(`connection closed; unread: ${this.buffer}`));
    });
  }

  /** Sends one line (or raw data when it ends with CRLF) and answers the server's reply. */
  async send(line: string): Promise<string> {
    this.socket.write(line.endsWith('\r\n') ? line : `${line}\r\n`);
    return this.reply();
  }

  /** EHLO, STARTTLS, and EHLO again over TLS. */
  async startTls(): Promise<void> {
    const ok = await this.send('STARTTLS');
    if (!ok.startsWith('220')) throw new Error(`STARTTLS refused: ${ok}`);
    this.socket.removeAllListeners('data');
    this.socket.removeAllListeners('close');
    const secure = tls.connect({ socket: this.socket, rejectUnauthorized: false });
    await new Promise<void>((resolve, reject) => secure.once('secureConnect', resolve).once('error', reject));
    this.socket = secure;
    this.attach(secure);
    await this.send('EHLO client.test');
  }

  async authPlain(token: string): Promise<string> {
    return this.send(`AUTH PLAIN ${Buffer.from(`\0svc\0${token}`).toString('base64')}`);
  }

  close() {
    this.socket.destroy();
  }
}
