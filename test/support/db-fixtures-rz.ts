import { Client } from 'pg';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../../db/orm';
import type { PgTimestamp } from '../../db/sql/pg-types';
import { sql, type Row } from './db-fixtures';

/**
 * More helpers for the statement tests of test/db/ (files r to z), beside db-fixtures.ts: running
 * a statement in a transaction of its own, and a gate that makes concurrent statements really
 * meet on a row (so a race test decides the race it names, not whichever call happened to run
 * first).
 */

/** Runs `fn` in a transaction of its own (a forked EntityManager): how the workers call their EntityManager statements. */
export function inTransaction<T>(orm: Orm, fn: (em: EntityManager) => Promise<T>): Promise<T> {
  return orm.em.fork().transactional((em) => fn(em as EntityManager));
}

/** Backends of this database waiting for a lock (a row lock, a transaction's end). */
export async function lockWaiters(orm: Orm): Promise<number> {
  const [row] = await sql<{ n: number }>(
    orm,
    `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
  );
  return row.n;
}

/** Waits (polling, not sleeping a fixed time) until at least `n` backends of this database wait for a lock. */
export async function waitForLockWaiters(orm: Orm, n: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const waiting = await lockWaiters(orm);
    if (waiting >= n) return;
    if (Date.now() > deadline) throw new Error(`waitForLockWaiters: ${waiting} of ${n} backends waiting after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * A transaction on a connection of its own (outside the ORM's pool) that holds a lock: what it
 * locked or wrote stays uncommitted until `commit` or `rollback`. Concurrent statements started
 * meanwhile queue behind it (`waitForLockWaiters`), then are released together, so they contend
 * with each other for real.
 */
export class Gate {
  private constructor(private readonly client: Client) {}

  /** Opens the transaction and runs `statements` in it (each with its values). */
  static async hold(orm: Orm, ...statements: [string, unknown[]?][]): Promise<Gate> {
    const client = new Client({ connectionString: orm.config.get('clientUrl') });
    await client.connect();
    await client.query('begin');
    for (const [text, values] of statements) await client.query(text, values ?? []);
    return new Gate(client);
  }

  async query<T = Record<string, any>>(text: string, values: unknown[] = []): Promise<T[]> {
    return (await this.client.query(text, values)).rows as T[];
  }

  async commit(): Promise<void> {
    await this.end('commit');
  }

  async rollback(): Promise<void> {
    await this.end('rollback');
  }

  private async end(how: 'commit' | 'rollback'): Promise<void> {
    try {
      await this.client.query(how);
    } finally {
      await this.client.end();
    }
  }
}

/**
 * Starts `calls` behind a gate holding `statements`: waits until all of them wait for a lock,
 * then ends the gate (commit by default) and answers their results (or rejections), in order.
 */
export async function releasedTogether<T>(
  orm: Orm,
  statements: [string, unknown[]?][],
  calls: (() => Promise<T>)[],
  end: 'commit' | 'rollback' = 'commit',
): Promise<PromiseSettledResult<T>[]> {
  const gate = await Gate.hold(orm, ...statements);
  const before = await lockWaiters(orm);
  const running = calls.map((call) => call());
  const settled = Promise.allSettled(running);
  try {
    await waitForLockWaiters(orm, before + calls.length);
  } finally {
    await gate[end]();
  }
  return settled;
}

/** The values of settled promises; throws the first rejection. */
export function values<T>(settled: PromiseSettledResult<T>[]): T[] {
  return settled.map((s) => {
    if (s.status === 'rejected') throw s.reason;
    return s.value;
  });
}

/**
 * DBOS's own system schema (`dbos`, its workflow_status table included), created as DBOS 5.3
 * creates it, for the statement that writes it (take-over-dead-workers.ts). DBOS does not export
 * its migration statements, so they are read from the package's file.
 */
// DBOS's own migrations of its system tables, as DBOS 5.3 runs them.
const { migrateSystemDatabase } = require('@dbos-inc/dbos-sdk/internal/system_database') as {
  migrateSystemDatabase(url: string, logger: unknown): Promise<void>;
};

export async function installDbosSchema(orm: Orm): Promise<void> {
  const quiet = { info() {}, debug() {}, warn() {}, error() {} };
  await migrateSystemDatabase(orm.config.get('clientUrl')!, quiet);
}

/** The rate window row of a key, or undefined. */
export async function rateWindow(
  orm: Orm,
  keyId: string,
): Promise<{ window_start: PgTimestamp; used: number; admitted: boolean } | undefined> {
  const [row] = await sql<{ window_start: PgTimestamp; used: number; admitted: boolean }>(
    orm,
    `select window_start, used, admitted from key_rate_windows where api_key_id = $1`,
    [keyId],
  );
  return row;
}

/** A UTC day (YYYY-MM-DD) `offset` days from a fixed base, for tests that each want days of their own. */
export function dayOf(offset: number, base = '2030-01-01'): string {
  return new Date(Date.parse(`${base}T00:00:00Z`) + offset * 86_400_000).toISOString().slice(0, 10);
}

/**
 * A fixture row as the typed shape another fixture asks for: `Row` (an index signature) carries
 * no required properties, so TypeScript will not pass it where `{ id, organization_id }` is due.
 */
export const typed = (row: Row) => row as Row & { id: string; organization_id: string; version: number; email: string };
