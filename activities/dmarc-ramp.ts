import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import type { DmarcRampActivities } from '../workflows/dmarc-ramp';
import { applyDmarcRequest, checkDmarcGate } from '../core/dmarc/ramp-ops';
import type { Clock } from '../core/clock';

export interface DmarcRampDeps {
  orm: Orm;
  clock: Clock;
  log: Logger;
}

export function createDmarcRampActivities(deps: DmarcRampDeps): DmarcRampActivities {
  // The workflow's time when it passes one (Temporal's time-skipping moves it days past the wall clock).
  const at = (atMs: number | null) => (atMs === null || atMs === undefined ? deps.clock.now() : new Date(atMs));
  return {
    async checkDmarcGate(domainId, atMs) {
      const r = await checkDmarcGate(deps.orm, domainId, at(atMs));
      deps.log.info({ domainId, ...r }, 'dmarc ramp: gate checked');
      return r;
    },
    async applyDmarcRequest(domainId, atMs) {
      const r = await applyDmarcRequest(deps.orm, domainId, at(atMs));
      deps.log.info({ domainId, ...r }, 'dmarc ramp: request applied');
      return r;
    },
  };
}
