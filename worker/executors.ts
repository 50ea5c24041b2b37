import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { pidAlive } from '../db/embedded-postgres';
import { claimWorker, readWorker } from '../db/sql/claim-worker';
import { renewWorker } from '../db/sql/renew-worker';
import { takeOverDeadWorkers } from '../db/sql/take-over-dead-workers';
import { Poller } from './poller';

/**
 * Executor ids for the embedded engine. Every process runs DBOS under an id of its own, and at
 * start DBOS recovers the unfinished workflows of that id only. So:
 *
 * - The id is WORKER_ID when set, else one kept in DATA_DIR/worker-id.<host> (made once), so a
 *   process restarted on the same data folder and host recovers what it left unfinished.
 * - The id is held through a row in `workers`, renewed by a heartbeat. A process takes an id only
 *   when no live process holds it: free, stale (no heartbeat for WORKER_DEAD_AFTER_SECONDS), or
 *   held by a pid on this host that no longer runs. If a live process holds the kept id (two
 *   processes on one data folder), this one runs under a fresh id; an explicit WORKER_ID held
 *   by a live process is refused.
 * - A process is known dead when its heartbeat is older than WORKER_DEAD_AFTER_SECONDS. Only then
 *   does a live process take its work over (db/sql/take-over-dead-workers.ts), one statement
 *   deciding which. A process that finds its own row gone (it was taken for dead, say after a
 *   long pause) stops at once: its work now belongs to others.
 */
export interface ExecutorOptions {
  orm: Orm;
  dataDir: string;
  /** WORKER_ID, when the operator names this process. */
  configuredId: string | undefined;
  /** WORKER_DEAD_AFTER_SECONDS. */
  deadAfterSeconds: number;
  log: Logger;
}

export interface Executor {
  id: string;
  /** Starts the heartbeat, and the takeover of dead processes' work once the engine runs. */
  start(takeOver: { internalQueue: string; applicationVersion: string } | null, onLost: () => void): void;
  stop(): Promise<void>;
}

const freshId = (host: string) => `${host}-${randomBytes(4).toString('hex')}`;

/** The id kept for this data folder and host, made on first use. */
function keptId(dataDir: string, host: string): string {
  const file = path.join(dataDir, `worker-id.${host}`);
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  fs.mkdirSync(dataDir, { recursive: true });
  const id = freshId(host);
  try {
    fs.writeFileSync(file, id + '\n', { flag: 'wx' });
    return id;
  } catch (err) {
    // Another process of this folder wrote it first: use theirs (the claim below settles who holds it).
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return fs.readFileSync(file, 'utf8').trim();
    throw err;
  }
}

/** Claims this process's executor id (before the engine launches, so its recovery is this process's alone). */
export async function claimExecutor(opts: ExecutorOptions): Promise<Executor> {
  const { orm, deadAfterSeconds, log } = opts;
  const host = os.hostname();
  const pid = process.pid;
  const tryClaim = async (id: string): Promise<boolean> => {
    const holder = await readWorker(orm, id, deadAfterSeconds);
    // A pid on this host that no longer runs is dead for sure; so is this very process (an engine restarted in it).
    const deadPid = holder && holder.host === host && (holder.pid === pid || !pidAlive(holder.pid)) ? holder.pid : -1;
    return claimWorker(orm, id, host, pid, deadAfterSeconds, deadPid);
  };

  let id = opts.configuredId ?? keptId(opts.dataDir, host);
  if (!(await tryClaim(id))) {
    const holder = await readWorker(orm, id, deadAfterSeconds);
    if (opts.configuredId) {
      throw new Error(
        `WORKER_ID ${id} is held by a running process (pid ${holder?.pid} on ${holder?.host}); give each process its own WORKER_ID`,
      );
    }
    const kept = id;
    id = freshId(host);
    if (!(await tryClaim(id))) throw new Error('could not claim a fresh executor id');
    log.warn(
      { kept, executorId: id },
      'the executor id of this data folder is held by a running process; this process runs under a fresh one',
    );
  }
  log.info({ executorId: id }, 'executor id claimed');

  const pollers: Poller[] = [];
  return {
    id,
    start(takeOver, onLost) {
      let lost = false;
      pollers.push(
        new Poller({
          name: 'worker-heartbeat',
          intervalMs: Math.max(500, (deadAfterSeconds * 1000) / 6),
          log,
          pass: async () => {
            if (lost || (await renewWorker(orm, id, host, pid))) return;
            lost = true;
            log.error({ executorId: id }, 'this process was taken for dead and its work taken over; stopping');
            onLost();
          },
        }),
      );
      if (takeOver) {
        pollers.push(
          new Poller({
            name: 'worker-takeover',
            intervalMs: Math.max(500, (deadAfterSeconds * 1000) / 2),
            log,
            pass: async () => {
              const r = await takeOverDeadWorkers(orm, deadAfterSeconds, id, takeOver.internalQueue, takeOver.applicationVersion);
              if (r.workflows > 0)
                log.warn({ dead: r.dead, workflows: r.workflows }, 'took over the unfinished workflows of dead processes');
              else if (r.dead.length) log.info({ dead: r.dead }, 'dead processes had nothing left to take over');
            },
          }),
        );
      }
      for (const p of pollers) p.start();
    },
    async stop() {
      await Promise.all(pollers.map((p) => p.stop()));
    },
  };
}
