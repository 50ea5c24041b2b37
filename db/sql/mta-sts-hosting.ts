import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../orm';
import type { DnsRecord } from '../entities';
import { runSql } from './run';

// MTA-STS hosting (RFC 8461) for the return-path hosts whose MX is the inbound listener, and the
// TLS-RPT reports (RFC 8460) senders post about them. The rules live in core/domains/mta-sts-hosting.ts.

export type HostedMode = 'testing' | 'enforce';

export interface HostingRow {
  host: string;
  mode: HostedMode;
  /** The MX the policy id was issued for. */
  mx: string;
  policyId: string;
  reportToken: string;
  changedAt: Date;
}

interface RawHosting {
  host: string;
  mode: HostedMode;
  mx: string;
  policy_id: string;
  report_token: string;
  changed_at: string;
}

// Timestamps come back from the ORM's connections as text; ISO text in UTC parses the same everywhere.
const COLUMNS = `host, mode, mx, policy_id, report_token, to_char(changed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as changed_at`;

const toRow = (r: RawHosting): HostingRow => ({
  host: r.host,
  mode: r.mode,
  mx: r.mx,
  policyId: r.policy_id,
  reportToken: r.report_token,
  changedAt: new Date(r.changed_at),
});

const run = runSql;

export async function readHosting(em: EntityManager, host: string): Promise<HostingRow | null> {
  const [row] = await run<RawHosting>(em, `select ${COLUMNS} from mta_sts_hosting where host = ?`, [host]);
  return row ? toRow(row) : null;
}

/** A host's row found by one column, only while a live, verified domain has the host as its return path. */
async function liveHosting(orm: Orm, column: 'host' | 'report_token', value: string): Promise<HostingRow | null> {
  const [row] = await run<RawHosting>(
    orm.em.fork(),
    `select ${COLUMNS} from mta_sts_hosting h
      where ${column} = ? and exists (
        select 1 from domains d where d.return_path_host = h.host and d.deleted_at is null and d.status = 'verified')`,
    [value],
  );
  return row ? toRow(row) : null;
}

/** The host a TLS-RPT `rua=` token names, while a live domain still has it as its return path. */
export const hostingByToken = (orm: Orm, token: string) => liveHosting(orm, 'report_token', token);

/** The policy a host serves: only while a live domain has it as its return path (else none: 404). */
export const servedHosting = (orm: Orm, host: string) => liveHosting(orm, 'host', host);

/** A host's first policy; a concurrent first one wins (nothing written then). True when this one was stored. */
export async function insertHosting(em: EntityManager, h: HostingRow): Promise<boolean> {
  const rows = await run(
    em,
    `insert into mta_sts_hosting (host, mode, mx, policy_id, report_token, changed_at) values (?, ?, ?, ?, ?, ?)
     on conflict (host) do nothing returning 1`,
    [h.host, h.mode, h.mx, h.policyId, h.reportToken, h.changedAt],
  );
  return rows.length > 0;
}

/** A new policy (mode or MX) under a new id, if the policy is still the one read as `fromPolicyId`. */
export async function reissueHosting(
  em: EntityManager,
  q: { host: string; fromPolicyId: string; mode: HostedMode; mx: string; policyId: string; at: Date },
): Promise<boolean> {
  const rows = await run(
    em,
    `update mta_sts_hosting set mode = ?, mx = ?, policy_id = ?, changed_at = ? where host = ? and policy_id = ? returning 1`,
    [q.mode, q.mx, q.policyId, q.at, q.host, q.fromPolicyId],
  );
  return rows.length > 0;
}

/**
 * A domain's records replaced, if they are still those read (`from`): the verification check
 * rewrites the same column, and neither may put back what the other replaced.
 */
export async function replaceRecords(em: EntityManager, domainId: string, from: DnsRecord[], records: DnsRecord[]): Promise<boolean> {
  const rows = await run(em, `update domains set records = ?::jsonb where id = ? and records = ?::jsonb returning 1`, [
    JSON.stringify(records),
    domainId,
    JSON.stringify(from),
  ]);
  return rows.length > 0;
}

export interface TlsReportRow {
  host: string;
  reporter: string;
  reportId: string;
  /** YYYY-MM-DD (UTC), the day the report's range starts. */
  day: string;
  successes: number;
  failures: number;
  at: Date;
}

/** Stores a report once per (host, reporter, report id); false when it was already there. */
export async function insertTlsReport(orm: Orm, r: TlsReportRow): Promise<boolean> {
  const rows = await run(
    orm.em.fork(),
    `insert into tls_rpt_reports (host, reporter, report_id, day, successes, failures, received_at)
     values (?, ?, ?, ?::date, ?, ?, ?) on conflict do nothing returning 1`,
    [r.host, r.reporter, r.reportId, r.day, r.successes, r.failures, r.at],
  );
  return rows.length > 0;
}

export interface TlsReportDay {
  day: string;
  reports: number;
  successes: number;
  failures: number;
}

/** A host's reports per day, days `from`..`to` (YYYY-MM-DD, inclusive), newest first. */
export async function tlsReportDays(orm: Orm, q: { host: string; from: string; to: string }): Promise<TlsReportDay[]> {
  const rows = await run<{ day: string; reports: string; successes: string; failures: string }>(
    orm.em.fork(),
    `select day::text as day, count(*)::text as reports, sum(successes)::text as successes, sum(failures)::text as failures
       from tls_rpt_reports where host = ? and day between ?::date and ?::date
      group by day order by day desc`,
    [q.host, q.from, q.to],
  );
  return rows.map((r) => ({ day: r.day, reports: Number(r.reports), successes: Number(r.successes), failures: Number(r.failures) }));
}
