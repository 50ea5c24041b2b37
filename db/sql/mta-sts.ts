import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

// MTA-STS (RFC 8461) policies as last fetched, and TLS-RPT (RFC 8460) session counts, for direct
// delivery (activities/delivery/mta-sts-source.ts) and the console.

export type StsModeColumn = 'enforce' | 'testing' | 'none';

/** A domain's row: a policy (policyId, mode set) and/or the error of the last failed fetch. */
export interface StsPolicyRow {
  domain: string;
  /** Null when no fetch has succeeded yet (only `error` is known). */
  policyId: string | null;
  mode: StsModeColumn | null;
  mx: string[];
  maxAge: number | null;
  fetchedAt: Date;
  /** The policy applies until then (fetched_at + max_age); an error-only row is expired at once. */
  expiresAt: Date;
  /** Why the last fetch failed; null after a success. */
  error: string | null;
}

const conn = (orm: Orm) => orm.em.fork().getConnection();

// Timestamps come back from the ORM's connections as text; ISO text in UTC parses the same everywhere.
const iso = (col: string) => `to_char(${col} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

interface RawPolicy {
  domain: string;
  policy_id: string | null;
  mode: StsModeColumn | null;
  mx: string[];
  max_age: number | null;
  fetched_at: string;
  expires_at: string;
  error: string | null;
}

export async function readPolicy(orm: Orm, domain: string): Promise<StsPolicyRow | null> {
  const [row] = await conn(orm).execute<RawPolicy[]>(
    `select domain, policy_id, mode, mx, max_age, ${iso('fetched_at')} as fetched_at, ${iso('expires_at')} as expires_at, error
       from mta_sts_policies where domain = ?`,
    [domain],
  );
  if (!row) return null;
  return {
    domain: row.domain,
    policyId: row.policy_id,
    mode: row.mode,
    mx: row.mx,
    maxAge: row.max_age,
    fetchedAt: new Date(row.fetched_at),
    expiresAt: new Date(row.expires_at),
    error: row.error,
  };
}

const UPSERT_POLICY: PreparedStatement = {
  name: 'mta_sts_upsert_policy_v1',
  text: `
insert into mta_sts_policies as p (domain, policy_id, mode, mx, max_age, fetched_at, expires_at, error)
values ($1, $2, $3, $4::text[], $5::int, $6::timestamptz, $6::timestamptz + $5::int * interval '1 second', null)
on conflict (domain) do update
   set policy_id = excluded.policy_id, mode = excluded.mode, mx = excluded.mx, max_age = excluded.max_age,
       fetched_at = excluded.fetched_at, expires_at = excluded.expires_at, error = null`,
};

/** A policy just fetched, valid for max_age seconds from `at`; replaces the domain's row and clears its error. */
export async function upsertPolicy(
  orm: Orm,
  p: { domain: string; policyId: string; mode: StsModeColumn; mx: string[]; maxAge: number; at: Date },
): Promise<void> {
  await runPrepared(orm, UPSERT_POLICY, [p.domain, p.policyId, p.mode, p.mx, p.maxAge, p.at]);
}

/**
 * A failed fetch, kept so the console can show why. A policy already stored stays as it was (an
 * unexpired one still applies, RFC 8461 §5.1); without one, an error-only row expiring at `at`.
 */
export async function recordPolicyError(orm: Orm, e: { domain: string; error: string; at: Date }): Promise<void> {
  await conn(orm).execute(
    `insert into mta_sts_policies as p (domain, fetched_at, expires_at, error) values (?, ?, ?, ?)
     on conflict (domain) do update
        set error = excluded.error,
            fetched_at = case when p.policy_id is null then excluded.fetched_at else p.fetched_at end,
            expires_at = case when p.policy_id is null then excluded.expires_at else p.expires_at end`,
    [e.domain, e.at, e.at, e.error],
  );
}

/** TLS session outcomes of one policy domain on one UTC day (`day`: YYYY-MM-DD). */
export interface TlsCountRow {
  policy_domain: string;
  day: string;
  successes: number;
  failures: number;
}

const ADD_TLS_COUNTS: PreparedStatement = {
  name: 'mta_sts_add_tls_counts_v1',
  text: `
insert into tls_report_counts as t (policy_domain, day, successes, failures)
select u.policy_domain, u.day, u.successes, u.failures
  from unnest($1::text[], $2::date[], $3::int[], $4::int[]) as u(policy_domain, day, successes, failures)
 order by u.policy_domain, u.day
on conflict (policy_domain, day) do update
   set successes = t.successes + excluded.successes, failures = t.failures + excluded.failures`,
};

/** Adds counts to each (policy domain, day) row; rows of one call must be distinct by that pair. */
export async function addTlsCounts(orm: Orm, rows: TlsCountRow[]): Promise<void> {
  if (rows.length === 0) return;
  await runPrepared(orm, ADD_TLS_COUNTS, [
    rows.map((r) => r.policy_domain),
    rows.map((r) => r.day),
    rows.map((r) => r.successes),
    rows.map((r) => r.failures),
  ]);
}

/** The console's table: days `from`..`to` (inclusive, YYYY-MM-DD), newest day first, then by domain. */
export async function listTlsCounts(orm: Orm, q: { from: string; to: string; limit: number }): Promise<TlsCountRow[]> {
  return conn(orm).execute<TlsCountRow[]>(
    `select policy_domain, day::text as day, successes, failures from tls_report_counts
      where day between ?::date and ?::date
      order by day desc, policy_domain
      limit ?`,
    [q.from, q.to, q.limit],
  );
}
