/**
 * A timestamp as a raw query returns it: text, never a Date. MikroORM's PostgreSqlConnection
 * installs pg type parsers that leave `date`, `timestamp`, `timestamptz` and `interval` (and their
 * arrays) as PostgreSQL printed them, for every statement on its pool (runPrepared, `em.execute`,
 * `getConnection().execute`); only entities hydrate Dates. A timestamptz reads
 * `2026-12-01 23:14:24.693+00`, or `2026-12-01T23:14:24.693+00:00` inside JSON: `new Date(x)`
 * parses both, and neither is the API's ISO 8601 `…Z`. Declared `Date`, one went verbatim into
 * every message's Date header. test/db/driver-types.test.ts pins what the driver returns.
 */
export type PgTimestamp = string;
