import type { EntityManager } from '@mikro-orm/postgresql';
import { countReporterReports, domainsForReportHost, insertReport } from '../../db/sql/dmarc-reports';
import { parseAggregateReport, reportXmlOf, ReportRefused, type ReportRecord } from './report';

/** What one message to `dmarc-reports@` turned out to be; stored as its inbound row's outcome. */
export type DmarcResult = 'dmarc_report' | 'dmarc_duplicate' | 'dmarc_refused' | 'dmarc_capped' | 'dmarc_unknown_domain';

/**
 * Reports taken per reporter (org_name, which RFC 7489 receivers fill with their domain), domain
 * and UTC day of receipt. A receiver sends one a day per domain, a few when it splits them; past
 * this the rest are refused (`dmarc_capped`), so a flood cannot fill the tables.
 */
export const MAX_REPORTS_PER_REPORTER_DAY = 50;
const DAY_MS = 86_400_000;

export interface AppliedDmarc {
  result: DmarcResult;
  /** Why a report was refused (logged; never the report's content). */
  reason: string | null;
}

/**
 * Stores the aggregate report a message carries, on the caller's transaction (the processor
 * stamps the inbound row in it). A report is about the domain(s) whose return-path host it was
 * mailed to; one naming another policy domain is refused. Anything unreadable is refused, never
 * thrown, so a hostile report cannot stall the processor.
 */
export async function applyDmarcReport(em: EntityManager, host: string, raw: Buffer, now: Date): Promise<AppliedDmarc> {
  const domains = await domainsForReportHost(em, host);
  if (domains.length === 0) return { result: 'dmarc_unknown_domain', reason: null };
  let report;
  try {
    report = parseAggregateReport(await reportXmlOf(raw));
  } catch (err) {
    return { result: 'dmarc_refused', reason: err instanceof ReportRefused ? err.message : 'unreadable message' };
  }
  let stored = false;
  let matched = false;
  let capped = false;
  const from = new Date(Math.floor(now.getTime() / DAY_MS) * DAY_MS);
  const to = new Date(from.getTime() + DAY_MS);
  for (const d of domains) {
    // policy_published names the organizational domain or the subdomain whose policy applied.
    if (report.policyDomain !== d.name && !report.policyDomain.endsWith(`.${d.name}`)) continue;
    matched = true;
    if ((await countReporterReports(em, { domainId: d.id, reporter: report.reporter, from, to })) >= MAX_REPORTS_PER_REPORTER_DAY) {
      capped = true;
      continue;
    }
    const selectors = new Set(d.selectors);
    const ok = await insertReport(em, {
      domainId: d.id,
      reporter: report.reporter,
      reportId: report.reportId,
      begin: report.begin,
      end: report.end,
      receivedAt: now,
      rows: report.records.map((r) => ({ ...r, ours: isOurs(r, d.name, selectors) })),
    });
    stored ||= ok;
  }
  if (!matched) return { result: 'dmarc_refused', reason: `report about ${report.policyDomain}, mailed to ${host}` };
  if (capped && !stored) {
    return {
      result: 'dmarc_capped',
      reason: `more than ${MAX_REPORTS_PER_REPORTER_DAY} reports from ${report.reporter} today, to ${host}`,
    };
  }
  return { result: stored ? 'dmarc_report' : 'dmarc_duplicate', reason: null };
}

/** Signed by this service: a DKIM signature with d= the domain under one of its selectors, whatever the result. */
function isOurs(r: ReportRecord, domain: string, selectors: Set<string>): boolean {
  return r.dkimAuth.some((a) => a.domain === domain && selectors.has(a.selector));
}
