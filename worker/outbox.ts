import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import type { KeyMode, Stream } from '../db/entities';
import { claimOutbox, markEnqueued, outboxHasDue, type OutboxRow } from '../db/sql/claim-outbox';
import type { Clock } from '../core/clock';
import { systemClock } from '../core/clock';
import { sendEmail, type SendEmailInput } from '../workflows/send-email';
import type { QueueName } from '../workflows/definition';
import type { Engine } from './engine';
import { Poller } from './poller';
import type { SendCaps } from './send-caps';

/** Most rows one claim takes. */
const BATCH = 200;
/** A pass now and then even without kicks: recovers anything a crash left unstarted, starts mail that fell due. */
const SAFETY_POLL_MS = 1000;
/** Kicks within this window share one pass, so a pass starts many messages. */
const COALESCE_MS = 20;
/** While a queue is full, how soon to look for room again (and how kicks are throttled). */
const FULL_RETRY_MS = 250;
/** Each mode's queue: live mail is rate-limited, test mail only simulated. */
const QUEUE_OF: Record<KeyMode, QueueName> = { live: 'delivery', test: 'simulation' };

/**
 * A lane: one mode and stream, claimed from its own index range with its own room in the
 * engine, so a bulk backlog never stands in front of transactional mail (stream isolation).
 */
interface Lane {
  mode: KeyMode;
  stream: Stream;
}
const LANES: Lane[] = [
  { mode: 'live', stream: 'transactional' },
  { mode: 'live', stream: 'bulk' },
  { mode: 'test', stream: 'transactional' },
  { mode: 'test', stream: 'bulk' },
];

interface Pass {
  /** A claim hit its batch limit: more rows are waiting and there is room for them. */
  more: boolean;
  /** Rows are waiting but a queue had no room. */
  full: boolean;
}

export interface OutboxOptions {
  /** Temporal only: how long a `sent` message's workflow waits for a delivery event (SendEmailInput). */
  confirmationWindowMs?: number;
  /** Daily caps, reserved for live mail before its workflow starts; absent: no caps (tests of the outbox alone). */
  caps?: SendCaps;
  clock?: Clock;
}

/**
 * The outbox: the API's statement stores a message with enqueued_at null and returns; this
 * starts its workflow. Rows are claimed FOR UPDATE SKIP LOCKED, so several processes can run
 * outboxes on one database, and the mark is committed only after the start succeeded. A crash
 * between the two starts the workflow again, which is a no-op (workflow id = email id).
 *
 * Dispatch is where the daily caps apply: each claimed live message is reserved against the
 * day's allowances in the same transaction (worker/send-caps.ts); one that does not fit is
 * parked in its row and started only when the release step wakes it. Scheduled mail waits
 * here until it is due (no engine timer), so it is reserved on the day it goes out.
 *
 * Backpressure: each lane is started only while the engine has room for it (`Engine.room`),
 * oldest due first; the backlog past that waits here and costs nothing until its turn.
 */
export class Outbox {
  private readonly poller: Poller;
  private readonly clock: Clock;

  constructor(
    private readonly orm: Orm,
    private readonly engine: Engine,
    private readonly log: Logger,
    private readonly opts: OutboxOptions = {},
  ) {
    this.clock = opts.clock ?? systemClock;
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

  /**
   * One pass: per lane, claim-reserve-start-mark chunks until the engine's room is filled or
   * BATCH messages were looked at. Parked messages take no room, so a capped backlog is parked
   * BATCH at a time without waiting for the queue. Each chunk is its own transaction, so the
   * counter locks one transaction takes follow one global order (see SendCaps.admit): concurrent
   * passes queue on a counter but never deadlock.
   */
  async runOnce(): Promise<Pass> {
    const rooms = await Promise.all(LANES.map((l) => this.engine.room(QUEUE_OF[l.mode], l.stream)));
    const now = this.clock.now();
    const pass: Pass = { more: false, full: false };
    for (const [i, lane] of LANES.entries()) {
      let room = rooms[i] ?? BATCH;
      if (room <= 0) {
        if (await outboxHasDue(this.orm.em.fork(), { ...lane, now })) pass.full = true;
        continue;
      }
      let examined = 0;
      while (room > 0 && examined < BATCH) {
        const limit = Math.min(room, BATCH - examined);
        const chunk = await this.chunk(lane, now, limit);
        examined += chunk.claimed;
        room -= chunk.started;
        if (chunk.claimed < limit) break;
        if (room <= 0) pass.full = examined < BATCH;
      }
      if (examined >= BATCH) pass.more = true;
    }
    return pass;
  }

  /** Claims up to `limit` of a lane, reserves the live ones, starts what may go and marks it, in one transaction. */
  private async chunk(lane: Lane, now: Date, limit: number): Promise<{ claimed: number; started: number }> {
    return this.orm.em.fork().transactional(async (em) => {
      const claimed = await claimOutbox(em, { ...lane, now, limit });
      if (claimed.length === 0) return { claimed: 0, started: 0 };
      // Test mail never touches the caps; live mail starts only with its allowances reserved.
      const start = lane.mode === 'live' && this.opts.caps ? new Set(await this.opts.caps.admit(em, claimed, now)) : null;
      const rows = start ? claimed.filter((r) => start.has(r.id)) : claimed;
      // Every message gets its workflow, even one canceled meanwhile: the workflow records the outcome.
      const done: string[] = [];
      const window = this.opts.confirmationWindowMs ?? 0;
      await Promise.all(
        rows.map(async (e) => {
          const input: SendEmailInput = { emailId: e.id, ...(window > 0 ? { confirmationWindowMs: window } : {}) };
          try {
            await this.engine.start(sendEmail, e.id, input, { queue: QUEUE_OF[e.mode], stream: e.stream });
            done.push(e.id);
          } catch (err) {
            this.log.error({ err, emailId: e.id }, 'could not start SendEmail; retried on the next pass');
          }
        }),
      );
      await markEnqueued(em, done, new Date());
      return { claimed: claimed.length, started: rows.length };
    });
  }

  async stop(): Promise<void> {
    await this.poller.stop();
  }
}
