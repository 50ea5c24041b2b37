/**
 * The bench's counting SMTP sink: a server on loopback that accepts every message and only
 * counts it, in a shared counter the bench reads without a round trip. It runs either in the
 * bench's own process (on the measured service's event loop, as issue 20's ceiling was first
 * defined) or on a thread of its own, as a relay on another machine would: there it never
 * answers slower because the process it measures is busy.
 */
import path from 'node:path';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { SMTPServer } from 'smtp-server';
import { startModuleThread } from '../core/module-thread';

export interface CountingSink {
  port: number;
  count: () => number;
  reset: () => void;
  close: () => Promise<void>;
}

async function listen(counter: Int32Array): Promise<{ port: number; close: () => Promise<void> }> {
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData: (stream, _s, cb) => {
      stream.resume();
      stream.on('end', () => {
        Atomics.add(counter, 0, 1);
        cb();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.server.address() as { port: number }).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export async function countingSink(opts: { thread?: boolean } = {}): Promise<CountingSink> {
  const counter = new Int32Array(new SharedArrayBuffer(4));
  const shared = {
    count: () => Atomics.load(counter, 0),
    reset: () => {
      Atomics.store(counter, 0, 0);
    },
  };
  if (!opts.thread) {
    const s = await listen(counter);
    return { ...shared, ...s };
  }
  // This file again, as the thread's body.
  const thread = startModuleThread(path.join(__dirname, 'sink'), { sinkCounter: counter.buffer });
  const port = await new Promise<number>((resolve, reject) => {
    thread.once('message', resolve);
    thread.once('error', reject);
  });
  return {
    ...shared,
    port,
    close: async () => {
      const closed = new Promise((resolve) => thread.once('message', resolve));
      thread.postMessage('close');
      await closed;
      await thread.terminate();
    },
  };
}

if (!isMainThread && workerData?.sinkCounter) {
  void listen(new Int32Array(workerData.sinkCounter as SharedArrayBuffer)).then((s) => {
    parentPort!.postMessage(s.port);
    parentPort!.once('message', () => void s.close().then(() => parentPort!.postMessage('closed')));
  });
}
