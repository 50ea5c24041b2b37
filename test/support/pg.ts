import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import pino from 'pino';
import { ensureEmbeddedPostgres, type RunningPostgres } from '../../db/embedded-postgres';

let running: RunningPostgres | undefined;
let baseDir: string | undefined;
let counter = 0;

/** One real PostgreSQL per test run (embedded, or TEST_DATABASE_URL's server when given). */
export async function testPostgres(): Promise<string> {
  if (process.env.TEST_DATABASE_URL) return process.env.TEST_DATABASE_URL;
  if (!running) {
    baseDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-test-'));
    running = await ensureEmbeddedPostgres(baseDir, pino({ level: 'warn' }));
  }
  return running.url;
}

/** A fresh database on the test server: every engine instance needs its own DBOS system tables. */
export async function newDatabase(prefix: string): Promise<string> {
  const url = new URL(await testPostgres());
  const name = `${prefix}_${process.pid}_${++counter}`.toLowerCase().replace(/[^a-z0-9_]/g, '_');
  const admin = new Client({ connectionString: url.toString() });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  url.pathname = `/${name}`;
  return url.toString();
}

export async function stopTestPostgres(): Promise<void> {
  if (running) await running.stop();
  running = undefined;
  if (baseDir) fs.rmSync(baseDir, { recursive: true, force: true });
}

export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `${prefix}-`));
}
