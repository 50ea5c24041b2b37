import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import type { DmarcRampActivities } from '../workflows/dmarc-ramp';
import { applyDmarcRequest, checkDmarcGate } from '../core/dmarc/ramp-ops';
import type { Clock } from '../core/clock';
import { publishDmarcRecord } from '../core/dmarc/ramp-publish';
import type { Secrets } from '../core/secrets';
import type { DnsResolver } from '../core/domains/dns';
import type { CloudflareSettings } from '../core/dns-publish/cloudflare';

export interface DmarcRampDeps {
  orm: Orm;
  clock: Clock;
  log: Logger;
  /** For publishing the ramp's record to a connected Cloudflare zone (absent: never published). */
  secrets?: Secrets;
  dns: DnsResolver;
  cloudflare?: CloudflareSettings;
}

export function createDmarcRampActivities(deps: DmarcRampDeps): DmarcRampActivities {
  // The workflow's time when it passes one (Temporal's time-skipping moves it days past the wall clock).
  const at = (atMs: number | null) => (atMs === null || atMs === undefined ? deps.clock.now() : new Date(atMs));
  return {
    async checkDmarcGate(domainId, atMs, runId) {
      const r = await checkDmarcGate(deps.orm, domainId, at(atMs), runId);
      deps.log.info({ domainId, ...r }, 'dmarc ramp: gate checked');
      return r;
    },
    async applyDmarcRequest(domainId, atMs, runId) {
      const r = await applyDmarcRequest(deps.orm, domainId, at(atMs), runId);
      deps.log.info({ domainId, ...r }, 'dmarc ramp: request applied');
      return r;
    },
    async publishDmarcRecord(domainId, actor) {
      const { orm, secrets, dns, log } = deps;
      const r = await publishDmarcRecord({ orm, secrets, dns, log, cloudflare: deps.cloudflare ?? {} }, domainId, actor);
      if (r.state !== 'not_connected') log.info({ domainId, ...r }, 'dmarc ramp: record published');
      return r;
    },
  };
}
