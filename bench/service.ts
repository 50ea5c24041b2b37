/** The bench's databases and services: each phase's service runs on a fresh database of its own. */
import pino from 'pino';
import { Client } from 'pg';
import { readConfig } from '../server/config';
import { startService } from '../server/service';
import { POOL, type StartService } from './phase';
import { readStat } from './proc-cpu';

/** Creates (or recreates, empty) the database `name` on the server of `adminUrl`; returns its URL. */
export async function newDb(adminUrl: string, name: string): Promise<string> {
  const c = new Client({ connectionString: adminUrl });
  await c.connect();
  await c.query(`drop database if exists ${name}`);
  await c.query(`create database ${name}`);
  await c.end();
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

async function dropDb(adminUrl: string, name: string): Promise<void> {
  const c = new Client({ connectionString: adminUrl });
  await c.connect();
  await c.query(`drop database if exists ${name} with (force)`);
  await c.end();
}

/**
 * Starts the service on a fresh database of its own, sending to the run's relay (`relayPort`)
 * unless told otherwise. Stopping it drops that database: a phase leaves a backlog of hundreds of
 * thousands of rows, and autovacuum working through them would take CPU from the phases after it.
 */
export function benchServices(adminUrl: string, dataDir: string, relayPort: number): StartService {
  return async (database, opts = {}) => {
    const service = await startService(
      {
        ...readConfig({}),
        databaseUrl: await newDb(adminUrl, database),
        port: 0,
        devSmtpPort: 0,
        dataDir,
        logLevel: 'warn',
        dbPoolSize: POOL,
        smtpUrl: `smtp://127.0.0.1:${opts.smtpPort ?? relayPort}`,
        ...(opts.sendRatePerSecond ? { sendRatePerSecond: opts.sendRatePerSecond } : {}),
        ...(opts.engineRetentionHours !== undefined ? { engineRetentionHours: opts.engineRetentionHours } : {}),
        smtpRelay: { ...readConfig({}).smtpRelay!, port: 0 },
        inboundSmtpPort: 0,
        platformDailyCap: 0,
        domainWarmup: false,
        ...opts.config,
      },
      { log: pino({ level: 'warn' }, pino.destination(2)), clock: opts.clock },
    );
    const stop = service.stop.bind(service);
    return Object.assign(service, {
      stop: async () => {
        await stop();
        await dropDb(adminUrl, database);
      },
    });
  };
}

/**
 * The postmaster of the PostgreSQL at `adminUrl`, when it runs on this machine (its processes are
 * in /proc): the parent of a backend. Null otherwise (a DATABASE_URL elsewhere, or not Linux).
 */
export async function postmasterOf(adminUrl: string): Promise<number | null> {
  const c = new Client({ connectionString: adminUrl });
  await c.connect();
  try {
    const { rows } = await c.query<{ pid: number }>('select pg_backend_pid() as pid');
    // A server elsewhere: the pid may name an unrelated process here.
    const backend = readStat(rows[0].pid);
    const postmaster = backend?.comm === 'postgres' ? readStat(backend.ppid) : null;
    return postmaster?.comm === 'postgres' ? postmaster.pid : null;
  } finally {
    await c.end();
  }
}
