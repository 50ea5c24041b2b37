import { writeCheckedRecords } from '../../db/sql/domain-records';
import type { Logger } from 'pino';
import type { Orm } from '../../db/orm';
import { Domain } from '../../db/entities';
import type { CheckDomainResult } from '../../workflows/domain-verification';
import type { Clock } from '../clock';
import { evaluate } from './identity';
import { lookup, type DnsResolver } from './dns';
import { ensureHosting } from './mta-sts-hosting';

export interface DomainVerificationDeps {
  orm: Orm;
  dns: DnsResolver;
  clock: Clock;
  log: Logger;
  /** PUBLIC_URL: given, a verified domain's MTA-STS hosting is made (or its policy reissued) after the check. */
  publicBase?: string;
}

/**
 * Resolves every record of a domain, stores what was observed, and moves the domain to
 * `verified` when every required record matches. Shared by the workflow's activity and the API's
 * "verify now". A verified domain stays verified: a failed re-check only updates what was observed.
 */
export async function checkDomain(deps: DomainVerificationDeps, domainId: string, attempt = 1): Promise<CheckDomainResult> {
  const em = deps.orm.em.fork();
  const domain = await em.findOne(Domain, { id: domainId });
  if (!domain || domain.deletedAt) return { status: 'deleted' };
  const records = await Promise.all(domain.records.map(async (r) => evaluate(r, await lookup(deps.dns, r))));
  const matched = records.length > 0 && records.every((r) => !r.required || r.status === 'verified');
  const now = deps.clock.now();
  const status = domain.status === 'verified' || matched ? 'verified' : 'pending';
  // Written only over the records read: a check that raced a change of them (the tracking host,
  // a DKIM switch, a DMARC step, MTA-STS hosting) must not put the old ones back; it looks again.
  const written = await writeCheckedRecords(em, { domainId, from: domain.records, records, at: now, status });
  if (!written) return attempt < 3 ? checkDomain(deps, domainId, attempt + 1) : { status: domain.status };
  deps.log.info({ domainId, status, records: records.map((r) => `${r.purpose}:${r.status}`) }, 'domain checked');
  // MTA-STS hosting only for a domain that proved its DNS (never for a namesake that did not).
  if (status === 'verified' && deps.publicBase) {
    await ensureHosting(deps.orm, domainId, deps.publicBase).catch((err: unknown) =>
      deps.log.error({ err, errorId: 'mta_sts_hosting_failed', domainId }, 'MTA-STS hosting not made; the next check tries again'),
    );
  }
  return { status };
}
