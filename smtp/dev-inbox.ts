import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { SMTPServer } from 'smtp-server';
import { simpleParser } from 'mailparser';
import type { Logger } from 'pino';

export interface InboxEntry {
  id: string;
  receivedAt: string;
  envelopeFrom: string;
  envelopeTo: string[];
  subject: string;
  from: string;
  to: string;
  messageId: string | null;
  size: number;
}

/**
 * The development inbox: a real SMTP server inside the process that keeps every message it
 * accepts as a .eml file under DATA_DIR/inbox, so `npm start` alone shows mail arriving.
 */
export class DevInbox {
  private server?: SMTPServer;
  private entries: InboxEntry[] = [];
  port = 0;

  constructor(
    private readonly dir: string,
    private readonly log: Logger,
  ) {}

  async start(port: number): Promise<void> {
    fs.mkdirSync(this.dir, { recursive: true });
    for (const f of fs
      .readdirSync(this.dir)
      .filter((f) => f.endsWith('.json'))
      .sort()) {
      try {
        this.entries.push(JSON.parse(fs.readFileSync(path.join(this.dir, f), 'utf8')));
      } catch {
        // A half-written index file from a crash: the message is skipped, not fatal.
      }
    }
    this.server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS', 'AUTH'],
      banner: 'svc development inbox',
      size: 64 * 1024 * 1024,
      logger: false,
      onData: (stream, session, callback) => {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          const raw = Buffer.concat(chunks);
          this.store(
            raw,
            session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            session.envelope.rcptTo.map((r) => r.address),
          )
            .then(() => callback())
            .catch((err) => callback(err));
        });
      },
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.server.address() as { port: number }).port;
    this.log.info({ port: this.port, dir: this.dir }, 'development inbox listening');
  }

  private async store(raw: Buffer, envelopeFrom: string, envelopeTo: string[]): Promise<void> {
    const parsed = await simpleParser(raw);
    const id = `${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
    const entry: InboxEntry = {
      id,
      receivedAt: new Date().toISOString(),
      envelopeFrom,
      envelopeTo,
      subject: parsed.subject ?? '',
      from: parsed.from?.text ?? '',
      to: Array.isArray(parsed.to) ? parsed.to.map((t) => t.text).join(', ') : (parsed.to?.text ?? ''),
      messageId: parsed.messageId ?? null,
      size: raw.length,
    };
    fs.writeFileSync(path.join(this.dir, `${id}.eml`), raw);
    fs.writeFileSync(path.join(this.dir, `${id}.json`), JSON.stringify(entry));
    this.entries.push(entry);
  }

  list(): InboxEntry[] {
    return [...this.entries].reverse();
  }

  get(id: string): InboxEntry | undefined {
    return this.entries.find((e) => e.id === id);
  }

  raw(id: string): Buffer | undefined {
    if (!this.get(id)) return undefined;
    return fs.readFileSync(path.join(this.dir, `${id}.eml`));
  }

  async stop(): Promise<void> {
    if (this.server) await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }
}
