import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { Email, type KeyMode } from '../db/entities';
import { sendEmail, type SendEmailInput } from '../workflows/send-email';
import type { QueueName } from '../workflows/definition';
import type { Engine } from './engine';
import { Poller } from './poller';

/** Most rows one claim takes. */
const BATCH = 200;
/** A pass now and then even without kicks: recovers anything a crash left unstarted. */
const SAFETY_POLL_MS = 1000;
/** Kicks within this window share one pass, so a pass starts many messages. */
const COALESCE_MS = 20;
/** While a queue is full, how soon to look for room again (and how kicks are throttled). */
const FULL_RETRY_MS = 250;
/** Each mode's queue: live mail is rate-limited, test mail only simulated. */
const QUEUE_OF: Record<KeyMode, QueueName> = { live: 'delivery', test: 'simulation' };
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
 * outboxes on one database, and the mark is committed only after the start succeeded. A crash
 * between the two starts the workflow again, which is a no-op (workflow id = email id).
 *
 * Backpressure: messages to send now are started only while the engine's queue for their mode
 * has room (`Engine.room`), oldest first; the backlog past that waits here, in
 * acceptance order, and costs nothing until its turn. Messages scheduled for later are started
 * at once: the engine holds them as delayed starts that take no queue room.
 */
export class Outbox {
  private readonly poller: Poller;

  constructor(
    private readonly orm: Orm,
    private readonly engine: Engine,
    private readonly log: Logger,
    /** Temporal only: how long a `sent` message's workflow waits for a delivery event (SendEmailInput). */
    private readonly confirmationWindowMs = 0,
  ) {
    this.poller = new Poller({
      name: 'outbox',
      intervalMs: SAFETY_POLL_MS,
      coalesceMs: COALESCE_MS,
      log,
      pass: async () => {
        const pass = await this.runOnce();
        return { more: pass.more, ...(pass.full ? { backoffMs: FULL_RETRY_MS } : {}) };
      },
    });
  }

  start(): void {
    this.poller.start();
  }

  /** Asks for a pass within a few milliseconds; kicks in between coalesce, so a pass starts many. */
  kick(): void {
    this.poller.kick();
  }

  /** One claim-start-mark pass. */
  async runOnce(): Promise<Pass> {
    const rooms = await Promise.all(MODES.map((m) => this.engine.room(QUEUE_OF[m])));
    const room = Object.fromEntries(MODES.map((m, i) => [m, rooms[i] ?? BATCH])) as Record<KeyMode, number>;
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
      await Promise.all(
        rows.map(async (e) => {
          const input: SendEmailInput = {
            emailId: e.id,
            ...(this.confirmationWindowMs > 0 ? { confirmationWindowMs: this.confirmationWindowMs } : {}),
          };
          try {
            await this.engine.start(sendEmail, e.id, input, { queue: QUEUE_OF[e.mode], notBeforeMs: e.scheduledAt?.getTime() ?? null });
            done.push(e.id);
          } catch (err) {
            this.log.error({ err, emailId: e.id }, 'could not start SendEmail; retried on the next pass');
          }
        }),
      );
      if (done.length) await em.nativeUpdate(Email, { id: { $in: done } }, { enqueuedAt: new Date() });
      return pass;
    });
  }

  async stop(): Promise<void> {
    await this.poller.stop();
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
