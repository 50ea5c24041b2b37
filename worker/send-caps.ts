import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import type { Clock } from '../core/clock';
import { nextUtcMidnight, organizationLimit, platformLimit, stageLimit, utcDay, warmupAdvances } from '../core/limits/caps';
import type { OutboxRow } from '../db/sql/claim-outbox';
import { ensureCounters, PLATFORM_SCOPE_ID, reserveChunk } from '../db/sql/reserve-send';
import { parkedDomains, unpark, usedOn } from '../db/sql/release-parked';
import { currentWarmupStage, lastSendingDay, recordWarmupCheck } from '../db/sql/warmup';
import { Poller } from './poller';

export interface SendCapsOptions {
  /** The release step's connection. */
  orm: Orm;
  /** PLATFORM_DAILY_CAP; 0: none. */
  platformDailyCap: number;
  clock: Clock;
  log: Logger;
}

/** Most parked messages one release statement wakes. */
const RELEASE_PAGE = 1000;

/**
 * The daily allowances at dispatch (the outbox) and their release. PostgreSQL decides: a chunk's
 * live messages are reserved by one statement (db/sql/reserve-send.ts); one that does not fit is
 * parked in its row (no workflow, no timer) and woken by `release` when a day turns or a limit rises.
 */
export class SendCaps {
  constructor(private readonly opts: SendCapsOptions) {}

  /**
   * Reserves the claimed live messages, in claim order, inside the outbox's transaction. Returns
   * the ids to start: those reserved and those no longer queued (their workflow records that);
   * the others are parked.
   */
  async admit(em: EntityManager, rows: OutboxRow[], now: Date): Promise<string[]> {
    if (rows.length === 0) return [];
    const day = utcDay(now);
    const until = nextUtcMidnight(now);
    const stages = await this.warmupStages(em, rows, day);
    const platform = platformLimit(this.opts.platformDailyCap);
    const counters = new Map<string, { scope: string; scopeId: string; day: string; stage: number | null }>();
    for (const r of rows) {
      if (platform !== null) counters.set('p', { scope: 'platform', scopeId: PLATFORM_SCOPE_ID, day, stage: null });
      counters.set(`o:${r.organization_id}`, { scope: 'organization', scopeId: r.organization_id, day, stage: null });
      counters.set(`d:${r.domain_id}`, { scope: 'domain', scopeId: r.domain_id, day, stage: stages.get(r.domain_id) ?? null });
    }
    // First in the transaction, before any counter is locked (worker/outbox.ts: one chunk, one
    // transaction): a pass that waits here on another's new row holds no lock that one needs.
    await ensureCounters(em, [...counters.values()]);
    const parkedRows = await reserveChunk(em, {
      day,
      until,
      platformLimit: platform,
      // In claim order: the statement admits each organization's and domain's messages in it.
      messages: rows.map((r) => {
        const stage = stages.get(r.domain_id) ?? null;
        return {
          id: r.id,
          organizationId: r.organization_id,
          domainId: r.domain_id,
          limits: { organization: organizationLimit(r.plan, r.daily_send_cap), domain: stageLimit(stage) },
          warmupStage: stage,
        };
      }),
    });
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const p of parkedRows) {
      if (!p.firstToday) continue;
      const r = byId.get(p.id)!;
      const scopeId = p.reason === 'platform_daily_cap' ? null : p.reason === 'organization_daily_cap' ? r.organization_id : r.domain_id;
      // Once per day per scope across processes (the counter row's reached_at decides).
      this.opts.log.warn(
        { reason: p.reason, scopeId, day, organizationId: r.organization_id },
        'daily send cap reached; mail waits for the next UTC day',
      );
    }
    // Reserved, and no longer queued (its workflow records that): both start.
    const held = new Set(parkedRows.map((p) => p.id));
    const start = rows.filter((r) => !held.has(r.id)).map((r) => r.id);
    const parked = held.size;
    if (parked) this.opts.log.debug({ parked, day }, 'messages parked behind daily caps');
    return start;
  }

  /**
   * Each domain's warm-up stage for today. The first dispatch of a UTC day runs the advance rule
   * on the domain's last sending day; a conditional update makes it once per domain per day.
   */
  private async warmupStages(em: EntityManager, rows: OutboxRow[], day: string): Promise<Map<string, number | null>> {
    const stages = new Map<string, number | null>();
    for (const r of rows) {
      if (stages.has(r.domain_id)) continue;
      if (r.warmup_stage === null || r.warmup_checked_on === day) {
        stages.set(r.domain_id, r.warmup_stage);
        continue;
      }
      const last = await lastSendingDay(em, r.domain_id, day);
      const advance =
        last !== null &&
        last.stage === r.warmup_stage &&
        warmupAdvances({ stage: last.stage, sent: last.sent, hardBounces: last.hard_bounces, complaints: last.complaints });
      const stage = advance ? r.warmup_stage + 1 : r.warmup_stage;
      if (await recordWarmupCheck(em, { domainId: r.domain_id, day, fromStage: r.warmup_stage, stage })) {
        if (advance) this.opts.log.info({ domainId: r.domain_id, stage, after: last }, 'domain warm-up advanced a stage');
        stages.set(r.domain_id, stage);
      } else {
        stages.set(r.domain_id, await currentWarmupStage(em, r.domain_id));
      }
    }
    return stages;
  }

  /**
   * Wakes parked messages as today's allowances admit them: domains by their oldest parked
   * message, each domain's oldest first, in pages, sharing the platform's and each
   * organization's remaining allowance between them. Memory stays flat: only counts and one
   * page of ids are ever held. Returns how many woke.
   */
  async release(): Promise<number> {
    const em = this.opts.orm.em.fork();
    const now = this.opts.clock.now();
    const day = utcDay(now);
    const domains = await parkedDomains(em);
    if (domains.length === 0) return 0;
    const used = await usedOn(em, day, [...domains.map((d) => d.domain_id), ...domains.map((d) => d.organization_id)]);
    const platform = platformLimit(this.opts.platformDailyCap);
    let platformLeft = platform === null ? Infinity : platform - (used.get(`platform:${PLATFORM_SCOPE_ID}`) ?? 0);
    const orgLeft = new Map<string, number>();
    let woke = 0;
    for (const d of domains) {
      if (platformLeft <= 0) break;
      const org = organizationLimit(d.plan, d.daily_send_cap);
      if (!orgLeft.has(d.organization_id))
        orgLeft.set(d.organization_id, org === null ? Infinity : org - (used.get(`organization:${d.organization_id}`) ?? 0));
      // The stage as the domain row has it: today's advance (at its first dispatch) shows in a later pass.
      const domainLimit = stageLimit(d.warmup_stage);
      const domainLeft = domainLimit === null ? Infinity : domainLimit - (used.get(`domain:${d.domain_id}`) ?? 0);
      let n = Math.min(platformLeft, orgLeft.get(d.organization_id)!, domainLeft);
      while (n > 0) {
        const page = await unpark(em, d.domain_id, Math.min(n, RELEASE_PAGE));
        woke += page;
        n -= page;
        platformLeft -= page;
        orgLeft.set(d.organization_id, orgLeft.get(d.organization_id)! - page);
        if (page < RELEASE_PAGE) break;
      }
    }
    if (woke) this.opts.log.info({ woke, day }, 'parked mail released into the outbox');
    return woke;
  }
}

/**
 * The release loop: a pass soon after each UTC midnight (a timer to the next one) and every
 * `intervalMs` besides, which picks up a limit raised during the day (an operator's warm-up
 * stage, an organization's cap). Woken mail goes to the outbox, which is kicked.
 */
export class CapRelease {
  private readonly poller: Poller;
  private midnight?: NodeJS.Timeout;

  constructor(
    private readonly caps: SendCaps,
    private readonly opts: { clock: Clock; log: Logger; intervalMs: number; onRelease: () => void },
  ) {
    this.poller = new Poller({
      name: 'cap-release',
      intervalMs: opts.intervalMs,
      log: opts.log,
      pass: async () => {
        const woke = await this.caps.release();
        if (woke > 0) this.opts.onRelease();
      },
    });
  }

  start(): void {
    this.poller.start();
    this.armMidnight();
  }

  /** Asks for a release pass soon. */
  kick(): void {
    this.poller.kick();
  }

  /** Runs a release now and answers how many messages woke (the benchmark times it). */
  async releaseNow(): Promise<number> {
    const woke = await this.caps.release();
    if (woke > 0) this.opts.onRelease();
    return woke;
  }

  private armMidnight(): void {
    const now = this.opts.clock.now();
    // A second past midnight, so the clock has surely turned the day; capped at the 24.8-day timer limit.
    const ms = Math.min(nextUtcMidnight(now).getTime() - now.getTime() + 1000, 2 ** 31 - 1);
    this.midnight = setTimeout(() => {
      this.poller.kick();
      this.armMidnight();
    }, ms);
    this.midnight.unref?.();
  }

  async stop(): Promise<void> {
    if (this.midnight) clearTimeout(this.midnight);
    await this.poller.stop();
  }
}
