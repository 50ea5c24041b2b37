import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { pidAlive } from '../db/embedded-postgres';
import { claimWorker } from '../db/sql/claim-worker';
import { readWorker } from '../db/sql/read-worker';
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
  /** Called once if this process finds itself taken for dead: it must stop at once. */
  onLost: () => void;
}

export interface Executor {
  id: string;
  /** Starts taking over dead processes' work (once the engine runs): DBOS's internal queue and application name. */
  takeOver(engine: { internalQueue: string; applicationName: string }): void;
  /** Stops the heartbeat and the takeover. */
  stop(): Promise<void>;
}

/** What an executor id may hold (WORKER_ID's rule too). An empty id would make DBOS run as "local". */
const ID_RE = /^[A-Za-z0-9._-]{1,100}$/;

const freshId = (hostname: string) => `${hostname.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 80)}-${randomBytes(4).toString('hex')}`;

/**
 * Where a pid means one process: the host name, its boot and its PID namespace. Two containers
 * sharing a host name (host networking) each have their own PID numbering, so "pid 1 on host x"
 * names different processes there; with the boot id and namespace in it, a pid check is made only
 * where the pid means the same process.
 */
function machine(): string {
  const parts = [os.hostname()];
  try {
    parts.push(fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim());
  } catch {
    // Not Linux: the host name alone.
  }
  try {
    parts.push(fs.readlinkSync('/proc/self/ns/pid'));
  } catch {
    // No PID namespaces here.
  }
  return parts.join('/');
}

/** The id kept for this data folder and host, made on first use (written whole, or not at all). */
function keptId(dataDir: string, hostname: string): string {
  const file = path.join(dataDir, `worker-id.${hostname}`);
  try {
    const kept = fs.readFileSync(file, 'utf8').trim();
    if (ID_RE.test(kept)) return kept;
    fs.rmSync(file, { force: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  fs.mkdirSync(dataDir, { recursive: true });
  const id = freshId(hostname);
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, id + '\n');
  try {
    // link fails if the file exists: of two processes making it, one id wins, complete.
    fs.linkSync(tmp, file);
    return id;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return fs.readFileSync(file, 'utf8').trim();
    throw err;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

/**
 * Claims this process's executor id and starts its heartbeat at once: before the engine launches,
 * so DBOS's start-up recovery covers this process's own work only, and however long the launch
 * takes, the claim stays fresh.
 */
export async function claimExecutor(opts: ExecutorOptions): Promise<Executor> {
  const { orm, deadAfterSeconds, log } = opts;
  const host = machine();
  const pid = process.pid;
  const tryClaim = async (id: string): Promise<boolean> => {
    const holder = await readWorker(orm, id);
    // A pid of this very machine, boot and PID namespace that no longer runs is dead for sure.
    const deadPid = holder && holder.host === host && holder.pid !== pid && !pidAlive(holder.pid) ? holder.pid : -1;
    return claimWorker(orm, id, host, pid, deadAfterSeconds, deadPid);
  };

  let id = opts.configuredId ?? keptId(opts.dataDir, os.hostname());
  if (!(await tryClaim(id))) {
    const holder = await readWorker(orm, id);
    if (opts.configuredId) {
      throw new Error(
        `WORKER_ID ${id} is held by a running process (pid ${holder?.pid} on ${holder?.host}); give each process its own WORKER_ID`,
      );
    }
    const kept = id;
    id = freshId(os.hostname());
    if (!(await tryClaim(id))) throw new Error('could not claim a fresh executor id');
    log.warn(
      { kept, executorId: id },
      'the executor id of this data folder is held by a running process; this process runs under a fresh one',
    );
  }
  log.info({ executorId: id }, 'executor id claimed');

  // Self-fencing: a process that cannot renew for half the span stops before others may take
  // its work over, and one whose row is gone (taken for dead) stops at once.
  let lost = false;
  let renewedAt = Date.now();
  const lose = (why: string) => {
    if (lost) return;
    lost = true;
    log.error({ executorId: id }, why);
    opts.onLost();
  };
  const pollers: Poller[] = [
    new Poller({
      name: 'worker-heartbeat',
      intervalMs: Math.max(500, (deadAfterSeconds * 1000) / 6),
      log,
      pass: async () => {
        if (lost) return;
        let renewed: boolean;
        try {
          renewed = await renewWorker(orm, id, host, pid);
        } catch (err) {
          if (Date.now() - renewedAt > (deadAfterSeconds * 1000) / 2)
            return lose('could not renew this executor for half its dead-after span; stopping');
          throw err;
        }
        if (!renewed) return lose('this process was taken for dead and its work taken over; stopping');
        renewedAt = Date.now();
      },
    }),
  ];
  pollers[0].start();
  return {
    id,
    takeOver(engine) {
      const poller = new Poller({
        name: 'worker-takeover',
        intervalMs: Math.max(500, (deadAfterSeconds * 1000) / 2),
        log,
        pass: async () => {
          const r = await takeOverDeadWorkers(orm, deadAfterSeconds, id, engine.internalQueue, engine.applicationName);
          if (r.workflows > 0) log.warn({ dead: r.dead, workflows: r.workflows }, 'took over the unfinished workflows of dead processes');
          else if (r.dead.length) log.info({ dead: r.dead }, 'dead processes had nothing left to take over');
        },
      });
      pollers.push(poller);
      poller.start();
    },
    async stop() {
      await Promise.all(pollers.map((p) => p.stop()));
    },
  };
}
