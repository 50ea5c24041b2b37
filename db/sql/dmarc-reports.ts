import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../orm';
import { uuidv7 } from '../ids';
import { runSql } from './run';

// DMARC aggregate reports (issue 41): stored by core/dmarc/ingest.ts, shown per day by the
// console, summed over a period by the ramp's gate. A row's day is its report's begin (UTC).

/** One sending source over a period: its volume, how much of it was DMARC-aligned, and what the operator said of it. */
export interface DmarcSourceStats {
  sourceIp: string;
  count: number;
  aligned: number;
  ours: boolean;
  unauthorized: boolean;
}

export interface DmarcStats {
  /** Distinct UTC days (of a report's begin) with reports in the period. */
  days: number;
  oursTotal: number;
  oursAligned: number;
  sources: DmarcSourceStats[];
}

const run = runSql;

/** A row is aligned when either DKIM or SPF passed aligned (RFC 7489 §6.6.2): that is a DMARC pass. */
const ALIGNED = `(r.dkim_aligned or r.spf_aligned)`;

/** The live, verified domains whose return-path host received a report: verified, so only who holds the DNS sees it. */
export async function domainsForReportHost(em: EntityManager, host: string): Promise<{ id: string; name: string; selectors: string[] }[]> {
  return run<{ id: string; name: string; selectors: string[] }>(
    em,
    `select d.id, d.name, coalesce(array_agg(lower(k.selector)) filter (where k.selector is not null), '{}') as selectors
       from domains d left join dkim_keys k on k.domain_id = d.id
      where d.return_path_host = ? and d.deleted_at is null and d.status = 'verified'
      group by d.id, d.name`,
    [host.toLowerCase()],
  );
}

export interface NewReportRow {
  sourceIp: string;
  count: number;
  disposition: string;
  /** policy_evaluated: the receiver's verdict on alignment, which is what DMARC decides on. */
  dkimAligned: boolean;
  spfAligned: boolean;
  headerFrom: string;
  dkimAuth: { domain: string; selector: string; result: string }[];
  ours: boolean;
}

/** Reports a reporter (org_name, any case) sent about a domain that were received in [from, to). */
export async function countReporterReports(
  em: EntityManager,
  q: { domainId: string; reporter: string; from: Date; to: Date },
): Promise<number> {
  const [row] = await run<{ n: number }>(
    em,
    `select count(*)::int as n from dmarc_reports where domain_id = ? and lower(reporter) = lower(?) and received_at >= ? and received_at < ?`,
    [q.domainId, q.reporter, q.from, q.to],
  );
  return row?.n ?? 0;
}

/**
 * Stores a report and its rows; false (nothing written) when the reporter (its org_name in any
 * case) sent this report id before.
 */
export async function insertReport(
  em: EntityManager,
  r: { domainId: string; reporter: string; reportId: string; begin: Date; end: Date; receivedAt: Date; rows: NewReportRow[] },
): Promise<boolean> {
  const id = uuidv7();
  const inserted = await run(
    em,
    `insert into dmarc_reports (id, domain_id, reporter, report_id, begin_at, end_at, received_at)
     select ?, ?, ?, ?, ?::timestamptz, ?::timestamptz, ?::timestamptz
      where not exists (select 1 from dmarc_reports where domain_id = ? and lower(reporter) = lower(?) and report_id = ?)
     on conflict (domain_id, reporter, report_id) do nothing returning 1`,
    [id, r.domainId, r.reporter, r.reportId, r.begin, r.end, r.receivedAt, r.domainId, r.reporter, r.reportId],
  );
  if (inserted.length === 0) return false;
  // One statement per report: the rows travel as one JSON array (a report may hold thousands).
  await run(
    em,
    `insert into dmarc_report_rows (report_id, source_ip, count, disposition, dkim_aligned, spf_aligned, header_from, dkim_auth, ours)
     select ?, x.source_ip, x.count, x.disposition, x.dkim_aligned, x.spf_aligned, x.header_from, x.dkim_auth, x.ours
       from jsonb_to_recordset(?::jsonb) as x(source_ip text, count int, disposition text, dkim_aligned boolean,
            spf_aligned boolean, header_from text, dkim_auth jsonb, ours boolean)`,
    [
      id,
      JSON.stringify(
        r.rows.map((w) => ({
          source_ip: w.sourceIp,
          count: w.count,
          disposition: w.disposition,
          dkim_aligned: w.dkimAligned,
          spf_aligned: w.spfAligned,
          header_from: w.headerFrom,
          dkim_auth: w.dkimAuth,
          ours: w.ours,
        })),
      ),
    ],
  );
  return true;
}

interface RawSource {
  day: string;
  source_ip: string;
  count: string;
  aligned: string;
  ours: boolean;
  unauthorized: boolean;
}

const SOURCES = `select r.source_ip, sum(r.count)::bigint as count, sum(case when ${ALIGNED} then r.count else 0 end)::bigint as aligned,
         bool_or(r.ours) as ours, coalesce(bool_or(s.unauthorized), false) as unauthorized`;
const FROM = `from dmarc_report_rows r join dmarc_reports p on p.id = r.report_id
         left join dmarc_sources s on s.domain_id = p.domain_id and s.source_ip = r.source_ip
        where p.domain_id = ? and p.begin_at >= ? and p.begin_at < ?`;

/**
 * Reports of a domain whose report began in [from, to), summed per source: the ramp's gate reads
 * these. A source counts as ours when any of its rows was signed by this service; "ours" totals
 * count only those rows, so another sender sharing an address does not dilute this service's rate.
 */
export async function dmarcStats(orm: Orm, q: { domainId: string; from: Date; to: Date }): Promise<DmarcStats> {
  const em = orm.em.fork();
  const params = [q.domainId, q.from, q.to];
  const [totals] = await run<{ days: string; ours_total: string | null; ours_aligned: string | null }>(
    em,
    `select count(distinct (p.begin_at at time zone 'UTC')::date) as days,
            sum(case when r.ours then r.count else 0 end)::bigint as ours_total,
            sum(case when r.ours and ${ALIGNED} then r.count else 0 end)::bigint as ours_aligned
       ${FROM}`,
    params,
  );
  const sources = await run<Omit<RawSource, 'day'>>(em, `${SOURCES} ${FROM} group by r.source_ip order by count desc, r.source_ip`, params);
  return {
    days: Number(totals.days),
    oursTotal: Number(totals.ours_total ?? 0),
    oursAligned: Number(totals.ours_aligned ?? 0),
    sources: sources.map(toSource),
  };
}

const toSource = (s: Omit<RawSource, 'day'>): DmarcSourceStats => ({
  sourceIp: s.source_ip,
  count: Number(s.count),
  aligned: Number(s.aligned),
  ours: s.ours,
  unauthorized: s.unauthorized,
});

export interface DmarcDay {
  /** YYYY-MM-DD, UTC. */
  day: string;
  reports: number;
  sources: DmarcSourceStats[];
}

/** The console's view: per UTC day (newest first), each source's volume and aligned count. */
export async function dmarcDays(orm: Orm, q: { domainId: string; from: Date; to: Date }): Promise<DmarcDay[]> {
  const em = orm.em.fork();
  const rows = await run<RawSource>(
    em,
    `${SOURCES}, to_char((p.begin_at at time zone 'UTC')::date, 'YYYY-MM-DD') as day
       ${FROM} group by 6, r.source_ip order by 6 desc, 2 desc, 1`,
    [q.domainId, q.from, q.to],
  );
  const days = new Map<string, DmarcDay>();
  const reports = await run<{ day: string; reports: string }>(
    em,
    `select to_char((p.begin_at at time zone 'UTC')::date, 'YYYY-MM-DD') as day, count(*) as reports
       from dmarc_reports p where p.domain_id = ? and p.begin_at >= ? and p.begin_at < ? group by 1`,
    [q.domainId, q.from, q.to],
  );
  const perDay = new Map(reports.map((r) => [r.day, Number(r.reports)]));
  for (const r of rows) {
    let d = days.get(r.day);
    if (!d) days.set(r.day, (d = { day: r.day, reports: perDay.get(r.day) ?? 0, sources: [] }));
    d.sources.push(toSource(r));
  }
  return [...days.values()];
}

/** The operator's verdict on a source; false when it already said so (nothing written, nothing to audit). */
export async function markSource(
  em: EntityManager,
  m: { domainId: string; sourceIp: string; unauthorized: boolean; by: string; at: Date },
): Promise<boolean> {
  const rows = await run(
    em,
    `insert into dmarc_sources (domain_id, source_ip, unauthorized, marked_by, marked_at) values (?, ?, ?, ?, ?)
     on conflict (domain_id, source_ip) do update set unauthorized = excluded.unauthorized, marked_by = excluded.marked_by,
       marked_at = excluded.marked_at
     where dmarc_sources.unauthorized is distinct from excluded.unauthorized returning 1`,
    [m.domainId, m.sourceIp, m.unauthorized, m.by, m.at],
  );
  return rows.length > 0;
}
