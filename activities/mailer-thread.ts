/**
 * The SMTP mailer on a thread of its own. Building each MIME message and running the SMTP
 * conversations is most of a delivery's CPU (nodemailer's streams, sockets, timers), and on the
 * main thread it competed with everything else the process does: the API accepting mail, the
 * engine, the outbox. Here it runs on another core; the main thread keeps the send gate (who goes
 * first) and the pass's SQL. Sends posted in the same tick cross in one message.
 */
import path from 'node:path';
import type { Worker } from 'node:worker_threads';
import { startModuleThread } from '../core/module-thread';
import { SmtpTransactionError, type Mailer, type OutgoingMessage, type RecipientRejection, type SendOutcome } from './mailer';

export interface ThreadSettings {
  url: string;
  finalDestination: boolean;
  connections: number;
}

export type ThreadRequest = { type: 'send'; messages: [number, OutgoingMessage][] } | { type: 'close' };
export type ThreadReply =
  { id: number; outcome: SendOutcome } | { id: number; error: { message: string; code: number | null; rejected: RecipientRejection[] } };

export function createThreadMailer(url: string, finalDestination: boolean, connections = 8): Mailer {
  const settings: ThreadSettings = { url, finalDestination, connections };
  const pending = new Map<number, { resolve: (o: SendOutcome) => void; reject: (e: Error) => void }>();
  let outbox: [number, OutgoingMessage][] = [];
  let nextId = 0;
  let worker: Worker | null = null;
  let closed = false;

  /** A thread that died fails what it held as a transient error (retried), and the next send starts a new one. */
  const lost = (w: Worker, why: string) => {
    if (worker !== w) return;
    worker = null;
    for (const p of pending.values()) p.reject(new SmtpTransactionError(`mailer thread ${why}`, null));
    pending.clear();
  };
  const thread = (): Worker => {
    if (worker) return worker;
    const w = startModuleThread(path.join(__dirname, 'mailer-thread-worker'), settings);
    w.on('message', (r: ThreadReply) => {
      const p = pending.get(r.id);
      if (!p) return;
      pending.delete(r.id);
      if ('outcome' in r) p.resolve(r.outcome);
      else p.reject(new SmtpTransactionError(r.error.message, r.error.code, r.error.rejected));
    });
    w.on('error', (err) => lost(w, `failed: ${err.message}`));
    w.on('exit', (code) => lost(w, `exited with code ${code}`));
    // The thread alone must not keep the process alive; pending sends hold it while they wait.
    w.unref();
    worker = w;
    return w;
  };
  const flush = () => {
    const messages = outbox;
    outbox = [];
    if (!messages.length) return;
    try {
      thread().postMessage({ type: 'send', messages } satisfies ThreadRequest);
    } catch (err) {
      // A message that cannot be copied to the thread fails its sends, not the process.
      for (const [id] of messages) {
        pending.get(id)?.reject(err as Error);
        pending.delete(id);
      }
    }
  };

  return {
    finalDestination,
    send(msg) {
      if (closed) return Promise.reject(new SmtpTransactionError('mailer closed', null));
      const id = nextId++;
      return new Promise<SendOutcome>((resolve, reject) => {
        pending.set(id, { resolve, reject });
        if (outbox.push([id, msg]) === 1) queueMicrotask(flush);
      });
    },
    close() {
      closed = true;
      const w = worker;
      if (!w) return;
      w.postMessage({ type: 'close' } satisfies ThreadRequest);
      // Past its pool's polite QUIT, a thread still busy is stopped.
      setTimeout(() => void w.terminate(), 2000).unref();
    },
  };
}
