/**
 * CPU seconds of each process the Temporal phase (bench/temporal.ts) runs on, from /proc (Linux):
 * taken at each measured drain's and the automation runs' start and end, so the result says where
 * the machine's cores went.
 */
import fs from 'node:fs';
import path from 'node:path';
import { procTable, treeSeconds } from './proc-cpu';

/** Seconds of CPU (user + system) each part of the machine used during one measured drain. */
export interface CpuUse {
  wallSeconds: number;
  /** This process: the API, its outbox, the counting sink (and, on the embedded engine, the engine and its SMTP client thread). */
  bench: number;
  /** The embedded PostgreSQL's processes (null with DATABASE_URL). */
  postgres: number | null;
  /** The Temporal server's processes (the dev server; a cluster's services and its PostgreSQL) and the `svc worker` processes (0 on the embedded engine). */
  server: number;
  workers: number;
  /** The server's share by process (a cluster: frontend, history, matching, worker, postgres). */
  serverParts: Record<string, number>;
}

export interface CpuSnapshot {
  at: number;
  bench: number;
  postgres: number | null;
  server: number;
  workers: number;
  serverParts: Record<string, number>;
}

/** CPU seconds of the processes the phase runs on, read from /proc (Linux; elsewhere only this process's). */
export class CpuMeter {
  /** Set once the Temporal processes run. */
  temporal: { servers: Record<string, number>; workers: number[] } | null = null;

  constructor(private readonly dataDir: string) {}

  snapshot(): CpuSnapshot {
    const u = process.cpuUsage();
    const table = procTable();
    const tree = (pid: number | null) => (pid === null || !table ? 0 : treeSeconds(table, pid));
    const pg = this.postmaster();
    return {
      at: performance.now(),
      bench: (u.user + u.system) / 1e6,
      postgres: pg === null || !table ? null : tree(pg),
      server: this.temporal ? Object.values(this.temporal.servers).reduce((s, pid) => s + tree(pid), 0) : 0,
      serverParts: Object.fromEntries(Object.entries(this.temporal?.servers ?? {}).map(([name, pid]) => [name, tree(pid)])),
      workers: this.temporal ? this.temporal.workers.reduce((s, pid) => s + tree(pid), 0) : 0,
    };
  }

  since(a: CpuSnapshot): CpuUse {
    const b = this.snapshot();
    return {
      wallSeconds: (b.at - a.at) / 1000,
      bench: b.bench - a.bench,
      postgres: a.postgres === null || b.postgres === null ? null : b.postgres - a.postgres,
      server: b.server - a.server,
      workers: b.workers - a.workers,
      serverParts: Object.fromEntries(Object.entries(b.serverParts).map(([name, s]) => [name, s - (a.serverParts[name] ?? 0)])),
    };
  }

  private postmaster(): number | null {
    try {
      return Number(fs.readFileSync(path.join(this.dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]) || null;
    } catch {
      return null;
    }
  }
}
