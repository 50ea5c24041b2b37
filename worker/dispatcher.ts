import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../db/orm';
import { Email, type KeyMode } from '../db/entities';
import type { Engine, SendEmailJob } from './engine';
import type { Logger } from '../server/logger';

/** Most rows one claim takes. */
const BATCH = 200;
/** A pass now and then even without kicks: recovers anything a crash left unstarted. */
const SAFETY_POLL_MS = 1000;
/** Kicks within this window share one pass, so a pass starts many messages. */
const COALESCE_MS = 20;
/** While a queue is full, how soon to look for room again (and how kicks are throttled). */
const FULL_RETRY_MS = 250;
const MODES: KeyMode[] = ['live', 'test'];

interface Pass {
  /** A claim hit its batch limit: more rows are waiting and there is room for them. */
  more: boolean;
  /** Rows are waiting but a queue had no room. */
  full: boolean;
}

/**
 * The outbox: the API's statement stores a message with enqueued_at null and returns; this
 * starts its workflow. Rows are claimed FOR UPDATE SKIP LOCKED, so several processes can run
 * dispatchers on one database, and the mark is committed only after the start succeeded. A crash
 * between the two starts the workflow again, which is a no-op (workflow id = email id).
 *
 * Backpressure: messages to send now are started only while the engine's queue for their mode
 * has room (`Engine.sendEmailRoom`), oldest first; the backlog past that waits here, in
 * acceptance order, and costs nothing until its turn. Messages scheduled for later are started
 * at once: the engine holds them as delayed starts that take no queue room.
 */
export class Dispatcher {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  private stopped = false;
  private soon?: NodeJS.Timeout;
  /** Until when kicks wait, because the last pass found a queue full. */
  private fullUntil = 0;

  constructor(
    private readonly orm: Orm,
    private readonly engine: Engine,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), ms);
    this.timer.unref();
  }

  /** Asks for a run within a few milliseconds; kicks in between coalesce, so a pass starts many. */
  kick(): void {
    if (this.stopped || this.soon) return;
    this.soon = setTimeout(
      () => {
        this.soon = undefined;
        this.run();
      },
      Math.max(COALESCE_MS, this.fullUntil - Date.now()),
    );
  }

  private run(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      let full = false;
      try {
        do {
          this.again = false;
          let pass: Pass;
          do pass = await this.runOnce();
          while (pass.more && !this.stopped);
          full = pass.full;
        } while (this.again && !full && !this.stopped);
      } catch (err) {
        this.log.error({ err }, 'dispatch failed; retrying on the next tick');
      } finally {
        this.running = undefined;
        this.fullUntil = full ? Date.now() + FULL_RETRY_MS : 0;
        this.schedule(full ? FULL_RETRY_MS : SAFETY_POLL_MS);
      }
    })();
  }

  /** One claim-start-mark pass. */
  async runOnce(): Promise<Pass> {
    const room = (await this.engine.sendEmailRoom()) ?? { live: BATCH, test: BATCH };
    return this.orm.em.fork().transactional(async (em) => {
      const now = new Date();
      const due = { $or: [{ scheduledAt: null }, { scheduledAt: { $lte: now } }] };
      const pass: Pass = { more: false, full: false };
      // Scheduled for later: a delayed start in the engine, which takes no queue room.
      const batches: Claimed[][] = [await claim(em, { scheduledAt: { $gt: now } }, { scheduledAt: 'asc' }, BATCH)];
      for (const mode of MODES) {
        if (room[mode] > 0) {
          const limit = Math.min(room[mode], BATCH);
          const rows = await claim(em, { mode, ...due }, { createdAt: 'asc', id: 'asc' }, limit);
          batches.push(rows);
          if (rows.length === limit) {
            if (limit === BATCH) pass.more = true;
            else pass.full = true;
          }
        } else if (await em.findOne(Email, { enqueuedAt: null, mode, ...due }, { fields: ['id'] })) {
          pass.full = true;
        }
      }
      if (batches[0].length === BATCH) pass.more = true;

      const rows = batches.flat();
      if (rows.length === 0) return pass;
      // Every message gets its workflow, even one canceled meanwhile: the workflow records the outcome.
      const done: string[] = [];
      const jobs: SendEmailJob[] = rows.map((e) => ({
        emailId: e.id,
        mode: e.mode,
        notBeforeMs: e.scheduledAt ? e.scheduledAt.getTime() : null,
      }));
      await Promise.all(
        jobs.map(async (job) => {
          try {
            await this.engine.startSendEmail(job);
            done.push(job.emailId);
          } catch (err) {
            this.log.error({ err, emailId: job.emailId }, 'could not start SendEmail; retried on the next pass');
          }
        }),
      );
      if (done.length) await em.nativeUpdate(Email, { id: { $in: done } }, { enqueuedAt: new Date() });
      return pass;
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.soon) clearTimeout(this.soon);
    await this.running;
  }
}

type Claimed = Pick<Email, 'id' | 'mode' | 'scheduledAt'>;

function claim(em: EntityManager, where: object, orderBy: object, limit: number): Promise<Claimed[]> {
  return em.find(Email, { enqueuedAt: null, ...where } as never, {
    fields: ['id', 'mode', 'scheduledAt'],
    orderBy: orderBy as never,
    limit,
    lockMode: LockMode.PESSIMISTIC_PARTIAL_WRITE,
  });
}
