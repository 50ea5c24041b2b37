import pino from 'pino';
import { readConfig } from '../server/config';
import { openDatabase, type Database } from '../server/database';
import { createLogger } from '../core/logging';
import { OperatorError } from '../core/limits/operator';

// What the svc commands share: usage mistakes (exit 2) and a database opened for one command.

/** A mistake in the command line: its message and the usage, exit 2, no stack. */
export class UsageError extends Error {}

/** An operator's command named something that is not there: told like a usage mistake (exit 2, no stack). */
export function operatorUsage(err: unknown): never {
  if (err instanceof OperatorError) throw new UsageError(err.message);
  throw err;
}

export function oneOf<T extends string>(flag: string, value: string | undefined, allowed: readonly T[], fallback?: T): T {
  if (value === undefined) {
    if (fallback !== undefined) return fallback;
    throw new UsageError(`--${flag} is required (${allowed.join('|')})`);
  }
  if (!allowed.includes(value as T)) throw new UsageError(`--${flag} must be one of ${allowed.join('|')}`);
  return value as T;
}

export function required(flag: string, value: string | undefined): string {
  if (!value) throw new UsageError(`--${flag} is required`);
  return value;
}

/** Runs one command against the database (DATABASE_URL, or DATA_DIR's embedded PostgreSQL, reused if running). */
export async function withDb<T>(fn: (db: Database) => Promise<T>): Promise<T> {
  const config = readConfig();
  // Logs go to stderr so stdout stays pure JSON.
  const log = createLogger(process.env.LOG_LEVEL || 'warn', pino.destination(2));
  const db = await openDatabase(config, log);
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}
