import type { EntityManager } from '@mikro-orm/postgresql';
import type { Clock } from '../clock';
import type { Domain, Organization } from '../../db/entities';
import { PLATFORM_SCOPE_ID } from '../../db/sql/reserve-send';
import { usedOn } from '../../db/sql/release-parked';
import { organizationLimit, platformLimit, stageLimit, utcDay } from './caps';

/** What the API needs to show the caps: the platform's cap and the clock whose UTC day counts. */
export interface CapsSettings {
  /** PLATFORM_DAILY_CAP; 0: none. */
  platformDailyCap: number;
  clock: Clock;
}

/** A domain's `warmup` field: stage (null when off), today's limit from it, recipients reserved today. */
export interface WarmupView {
  stage: number | null;
  daily_limit: number | null;
  sent_today: number;
}

/** The warm-up view of each domain, from one read of today's counters. */
export async function warmupViews(
  em: EntityManager,
  caps: CapsSettings,
  domains: Pick<Domain, 'id' | 'warmupStage'>[],
): Promise<Map<string, WarmupView>> {
  const used = await usedOn(
    em,
    utcDay(caps.clock.now()),
    domains.map((d) => d.id),
  );
  return new Map(
    domains.map((d) => [
      d.id,
      { stage: d.warmupStage, daily_limit: stageLimit(d.warmupStage), sent_today: used.get(`domain:${d.id}`) ?? 0 },
    ]),
  );
}

/** Today's use of each of the three allowances as GET /organization shows it (limit null: no cap). */
export async function dailyUsage(
  em: EntityManager,
  caps: CapsSettings,
  org: Pick<Organization, 'id' | 'plan' | 'dailySendCap'>,
  domains: Pick<Domain, 'id' | 'name' | 'warmupStage'>[],
) {
  const day = utcDay(caps.clock.now());
  const used = await usedOn(em, day, [org.id, ...domains.map((d) => d.id)]);
  return {
    day,
    platform: { limit: platformLimit(caps.platformDailyCap), sent: used.get(`platform:${PLATFORM_SCOPE_ID}`) ?? 0 },
    organization: { limit: organizationLimit(org.plan, org.dailySendCap), sent: used.get(`organization:${org.id}`) ?? 0 },
    domains: domains.map((d) => ({
      id: d.id,
      name: d.name,
      warmup_stage: d.warmupStage,
      limit: stageLimit(d.warmupStage),
      sent: used.get(`domain:${d.id}`) ?? 0,
    })),
  };
}
