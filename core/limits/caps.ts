import type { Plan, WaitingReason } from '../../db/entities';

/**
 * The three daily allowances of the spec's limits table (UTC day, each recipient counts one).
 * Pure rules: the outbox reserves against them in one statement (db/sql/send-caps.ts), the
 * release step and the API read them, nothing else decides a limit.
 */

/** Warm-up stages: a new domain starts at stage 1 and climbs one stage per good day. */
export const WARMUP_STAGES = [200, 500, 1_000, 2_000, 5_000, 10_000, 20_000] as const;

/** The scopes, in the order their counters are locked (platform → organization → domain). */
export type CapScope = 'platform' | 'organization' | 'domain';
export type { WaitingReason };

/** Plans with a ceiling that an organization's own cap can only lower; the others ("service plans") have none. */
export const PLAN_CEILING: Partial<Record<Plan, number>> = { free: 100 };
/** The cap of a service plan whose organization left `daily_send_cap` blank. */
export const SERVICE_PLAN_DEFAULT_CAP = 20_000;

/** The day's limit of a warm-up stage (1-based); null (warm-up off) means no domain cap. */
export function stageLimit(stage: number | null): number | null {
  if (stage === null) return null;
  return WARMUP_STAGES[Math.min(Math.max(stage, 1), WARMUP_STAGES.length) - 1];
}

/**
 * The organization's daily limit, null for none. Free plan: blank or 0 means the ceiling, a
 * value can only lower it. Service plans: blank means 20,000, 0 means no cap, a value is the cap.
 */
export function organizationLimit(plan: Plan, dailySendCap: number | null): number | null {
  const ceiling = PLAN_CEILING[plan];
  if (ceiling !== undefined) return dailySendCap ? Math.min(dailySendCap, ceiling) : ceiling;
  if (dailySendCap === null) return SERVICE_PLAN_DEFAULT_CAP;
  return dailySendCap === 0 ? null : dailySendCap;
}

/** The platform limit from PLATFORM_DAILY_CAP; 0 means none. */
export const platformLimit = (cap: number): number | null => (cap > 0 ? cap : null);

/** A domain's sending on its last day with mail, and what came back about it. */
export interface WarmupDay {
  stage: number;
  sent: number;
  hardBounces: number;
  complaints: number;
}

/**
 * Move up one stage after a day that sent at least half its stage with a hard-bounce rate under
 * 2% and a complaint rate under 0.1% (rates count only when feedback exists, i.e. they are 0
 * otherwise). Never down; the last stage is the last.
 */
export function warmupAdvances(day: WarmupDay): boolean {
  if (day.stage >= WARMUP_STAGES.length) return false;
  const limit = stageLimit(day.stage)!;
  if (day.sent < limit / 2 || day.sent === 0) return false;
  return day.hardBounces / day.sent < 0.02 && day.complaints / day.sent < 0.001;
}

/** The UTC day of an instant, as PostgreSQL's `date` text (YYYY-MM-DD). */
export const utcDay = (at: Date): string => at.toISOString().slice(0, 10);

/** The next UTC midnight after `at`: when a parked message's day turns. */
export function nextUtcMidnight(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1));
}
