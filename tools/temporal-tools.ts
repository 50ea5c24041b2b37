import fs from 'node:fs';
import path from 'node:path';
import { searchAttributeFlags } from '../worker/temporal-search-attributes';

/** Where `npm run tools` (tools/install.sh) puts Temporal's dev server and time-skipping test server. */
export const TOOLS_BIN = path.resolve(__dirname, '../.tools/bin');

/** The installed tool's path, or undefined when `npm run tools` has not installed it (no Go, no Java). */
export function temporalToolPath(name: 'temporal' | 'temporal-test-server'): string | undefined {
  const file = path.join(TOOLS_BIN, name);
  return fs.existsSync(file) ? file : undefined;
}

export interface DevServerOptions {
  port: number;
  uiPort: number;
  /** Defaults to a free port chosen by the server; tests pass one so two servers never clash. */
  metricsPort?: number;
  /** SQLite file (in WAL mode): the server keeps its histories across restarts. Absent: in memory. */
  dbFile?: string;
  /** 127.0.0.1 unless told otherwise: nothing of the dev server is reachable from elsewhere. */
  ip?: string;
}

/**
 * `temporal server start-dev` arguments: loopback only, the version check (which calls a host on
 * the internet) off, and the search attributes the engine sets registered. A SQLite file is kept
 * in WAL mode: in SQLite's default (rollback journal) mode every transaction holds the whole file
 * and its readers wait, and the server's CPU per workflow was a half more (bench/temporal.ts:
 * automation runs 12/s → 17-22/s on 2 cores). Commits stay as durable as before.
 */
export function devServerArgs(o: DevServerOptions): string[] {
  const ip = o.ip ?? '127.0.0.1';
  return [
    'server',
    'start-dev',
    '--ip',
    ip,
    '--ui-ip',
    ip,
    '--port',
    String(o.port),
    '--ui-port',
    String(o.uiPort),
    ...(o.metricsPort ? ['--metrics-port', String(o.metricsPort)] : []),
    ...(o.dbFile ? ['--db-filename', o.dbFile, '--sqlite-pragma', 'journal_mode=wal'] : []),
    '--log-level',
    'warn',
    '--dynamic-config-value',
    'frontend.enableServerVersionCheck=false',
    ...searchAttributeFlags(),
  ];
}
