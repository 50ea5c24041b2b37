/**
 * The mailer thread's body (activities/mailer-thread.ts): the pooled SMTP mailer of mailer.ts,
 * fed by messages posted from the main thread, each answered by its id.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { createSmtpMailer, SmtpTransactionError, type OutgoingMessage } from './mailer';
import type { ThreadReply, ThreadRequest, ThreadSettings } from './mailer-thread';

const settings = workerData as ThreadSettings;
const mailer = createSmtpMailer(settings.url, settings.finalDestination, settings.connections);
const port = parentPort!;

async function send(id: number, msg: OutgoingMessage): Promise<void> {
  // Structured cloning turns a Buffer into a plain Uint8Array; nodemailer wants Buffers.
  const attachments = msg.attachments.map((a) => ({
    ...a,
    content: Buffer.from(a.content.buffer, a.content.byteOffset, a.content.byteLength),
  }));
  let reply: ThreadReply;
  try {
    reply = { id, outcome: await mailer.send({ ...msg, attachments }) };
  } catch (e) {
    const err = e instanceof SmtpTransactionError ? e : new SmtpTransactionError(String((e as Error)?.message ?? e), null);
    reply = { id, error: { message: err.message, code: err.code, rejected: err.rejected } };
  }
  port.postMessage(reply);
}

port.on('message', (m: ThreadRequest) => {
  if (m.type === 'close') {
    mailer.close();
    port.close();
    return;
  }
  for (const [id, msg] of m.messages) void send(id, msg);
});
