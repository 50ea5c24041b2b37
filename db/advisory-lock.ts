import pg from 'pg';

/** Advisory lock keys the service takes (constants used nowhere else). */
export const LOCKS = {
  /** Our migrations. */
  migrations: 0x73766331,
  /** The embedded engine's launch, which creates and migrates its own `dbos` schema. */
  engineLaunch: 0x73766332,
} as const;

/**
 * Runs `fn` under a session advisory lock held on a connection of its own: processes starting at
 * once on a fresh database (replicas, `svc start` twice) take turns at schema work, and the later
 * ones find nothing left to do instead of failing on a half-made schema or a deadlock.
 */
export async function withAdvisoryLock<T>(databaseUrl: string, key: number, fn: () => Promise<T>): Promise<T> {
  const lock = new pg.Client({ connectionString: databaseUrl, application_name: 'svc-schema-lock' });
  await lock.connect();
  try {
    // Polled, not waited on: a session blocked in pg_advisory_lock is a running statement, and
    // DBOS's CREATE INDEX CONCURRENTLY (inside the holder's work) waits for every running one.
    while (!(await lock.query<{ ok: boolean }>('select pg_try_advisory_lock($1) as ok', [key])).rows[0].ok) {
      await new Promise((r) => setTimeout(r, 200));
    }
    return await fn();
  } finally {
    // Ending the session releases the lock.
    await lock.end().catch(() => undefined);
  }
}
