import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { claimOutbox, markEnqueued, outboxHasDue } from '../db/sql/claim-outbox';
import type { Clock } from '../core/clock';
import { systemClock } from '../core/clock';
import { claimScheduled } from '../db/sql/scheduled-timers';
import { releaseDueRetries } from '../db/sql/release-retries';
import { sendRateRoom, takeSendRate } from '../db/sql/send-rate';
import { SCHEDULE_LEAD_MS, type Engine } from './engine';
import { LANES, QUEUE_OF, runsOf, startRun, startTimerRun, type Lane } from './outbox-runs';
import { Poller } from './poller';
import type { SendCaps } from './send-caps';

/** Most rows one pass looks at per lane; a pass that hit it is followed by another at once. */
const PASS = 1000;
/** Most rows one chunk (one transaction) claims. */
const CHUNK = 500;
/**
 * Messages per SendBatch run: the engine's bookkeeping (a start, a few checkpoints) is paid per
 * run, so a backlog leaves at the rate of SMTP and SQL, not of the engine (docs/architecture.md).
 */
export const MESSAGES_PER_RUN = 100;
/** A pass now and then even without kicks: recovers anything a crash left unstarted, starts mail that fell due. */
const SAFETY_POLL_MS = 1000;
/** Kicks within this window share one pass, so a pass starts many messages. */
const COALESCE_MS = 20;
/** While a queue is full, how soon to look for room again (and how kicks are throttled). */
const FULL_RETRY_MS = 250;
interface Pass {
  /** A claim hit its batch limit: more rows are waiting and there is room for them. */
  more: boolean;
  /** Rows are waiting but a queue had no room, or the send rate's window is spent. */
  full: boolean;
}

/**
 * The send rate as windows of a quarter second (same rate): a window of one second would let
 * the whole second's allowance go at once and then nothing for a second, so mail arriving just
 * after would wait up to a second; a transactional message behind a bulk backlog waits at most
 * a quarter of that.
 */
export function rateWindows(perSecond: number): { limit: number; periodMs: number } {
  const limit = Math.max(1, Math.ceil(perSecond / 4));
  return { limit, periodMs: (limit / perSecond) * 1000 };
}

/** The number of the rate window that holds now. */
function rateWindowNo(w: { periodMs: number }): number {
  return Math.floor(Date.now() / w.periodMs);
}

export interface OutboxOptions {
  /** Temporal only: how long a `sent` message's workflow waits for a delivery event (SendEmailInput). */
  confirmationWindowMs?: number;
  /** Daily caps, reserved for live mail before its workflow starts; absent: no caps (tests of the outbox alone). */
  caps?: SendCaps;
  clock?: Clock;
  /** SEND_RATE_PER_SECOND: live starts per second across every process (the send_rate row); absent: unlimited. */
  sendRatePerSecond?: number;
  /** RETRY_BASE_SECONDS: the first delay before a batch tries again what the relay refused for now. */
  retryBaseSeconds?: number;
  /** Messages per SendBatch run (default MESSAGES_PER_RUN); tests of lanes and rooms count one per run. */
  messagesPerRun?: number;
  /**
   * On an engine that waits on scheduled mail (Engine.waitsScheduled): mail scheduled further
   * ahead than this gets its SendEmail run at once, waiting on the engine's durable timer; nearer
   * mail waits here. Default SCHEDULE_LEAD_MS.
   */
  scheduleLeadMs?: number;
}

/**
 * The outbox: the API's statement stores a message with enqueued_at null and returns; this
 * starts its workflow. Rows are claimed FOR UPDATE SKIP LOCKED, so several processes can run
 * outboxes on one database, and the mark is committed only after the start succeeded. A crash
 * between the two starts the workflow again, which is a no-op (workflow id = email id).
 *
 * Dispatch is where the daily caps apply: each claimed live message is reserved against the
 * day's allowances in the same transaction (worker/send-caps.ts); one that does not fit is
 * parked in its row and started only when the release step wakes it. Scheduled mail is reserved
 * on the day it goes out too: on the embedded engine it waits here until due; on Temporal
 * (Engine.waitsScheduled) its SendEmail run starts at once and waits on a durable timer, then
 * hands the message back here (`handBack`), and is admitted by a signal with its start.
 *
 * Backpressure: each lane is started only while the engine has room for it (`Engine.room`),
 * oldest due first; the backlog past that waits here and costs nothing until its turn. Live mail
 * also takes its starts from the platform send rate here, in SQL, so the rate holds per message
 * however messages are grouped into runs and however many processes run outboxes.
 *
 * Runs: a chunk's messages start as SendBatch runs of up to MESSAGES_PER_RUN. Only with a
 * confirmation window (Temporal: a `sent` message's run waits for a delivery event or an
 * operator's close, signalled by email id) does each message get its own SendEmail run
 * (worker/outbox-runs.ts).
 */
export class Outbox {
  private readonly poller: Poller;
  private readonly clock: Clock;
  /** When the last pass looked for scheduled mail to start timers for (epoch ms). */
  private timersAt = 0;
  /** When the last pass released deferred mail whose next attempt is due (epoch ms, wall time). */
  private retriesAt = 0;

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
   * One pass: per lane, claim-reserve-rate-start-mark chunks until the engine's room is filled,
   * the rate's window is spent or PASS messages were looked at. Parked messages take no room, so
   * a capped backlog is parked PASS at a time without waiting for the queue. Each chunk is its
   * own transaction, so the counter locks one transaction takes follow one global order (see
   * SendCaps.admit, then the send_rate row): concurrent passes queue but never deadlock.
   */
  async runOnce(): Promise<Pass> {
    const rooms = await Promise.all(LANES.map((l) => this.engine.room(QUEUE_OF[l.mode], l.stream)));
    const now = this.clock.now();
    // Deferred mail due again goes back in the outbox, once a second at most (a range scan that
    // finds nothing when nothing is due), and leaves in this pass with the rest.
    if (Date.now() - this.retriesAt >= SAFETY_POLL_MS) {
      this.retriesAt = Date.now();
      const released = await releaseDueRetries(this.orm.em.fork(), { now, limit: PASS });
      if (released > 0) this.log.info({ released }, 'deferred mail due again');
      if (released >= PASS) this.retriesAt = 0;
    }
    const pass: Pass = { more: false, full: false };
    const perRun = this.perRun();
    for (const [i, lane] of LANES.entries()) {
      // Room is counted in runs; a run takes up to perRun messages.
      let room = rooms[i] ?? Math.ceil(PASS / perRun);
      if (room <= 0) {
        if (await outboxHasDue(this.orm.em.fork(), { ...lane, now })) pass.full = true;
        continue;
      }
      let examined = 0;
      // Parking: the lane's mail is held by the daily caps, not the rate, so chunks stay whole.
      let parking = false;
      while (room > 0 && examined < PASS) {
        let limit = Math.min(room * perRun, CHUNK, PASS - examined);
        const free = parking ? null : await this.rateRoom(lane);
        if (free === 0) {
          pass.full = true;
          break;
        }
        if (free !== null) limit = Math.min(limit, free);
        const chunk = await this.chunk(lane, now, limit);
        examined += chunk.claimed;
        room -= chunk.runs;
        if (chunk.parked > 0) parking = true;
        if (chunk.throttled) {
          pass.full = true;
          break;
        }
        if (chunk.claimed < limit) break;
        if (room <= 0) pass.full = examined < PASS;
      }
      if (examined >= PASS) pass.more = true;
    }
    // Mail a minute or more ahead need not leave within milliseconds: once a second is plenty,
    // and kicks under load (many passes a second) pay nothing for it.
    if (this.engine.waitsScheduled && now.getTime() - this.timersAt >= SAFETY_POLL_MS) {
      this.timersAt = now.getTime();
      if (await this.startTimers()) {
        pass.more = true;
        this.timersAt = 0;
      }
    }
    return pass;
  }

  /**
   * Starts a SendEmail run for each message scheduled beyond the lead, which waits on the
   * engine's durable timer (SendEmailInput.handBack); no caps, rate or room: nothing is sent
   * now. Answers whether a lane had more than one chunk waiting.
   */
  private async startTimers(): Promise<boolean> {
    // The clock read now, not at the pass's start: the lanes before may have taken a while.
    const after = new Date(this.clock.now().getTime() + (this.opts.scheduleLeadMs ?? SCHEDULE_LEAD_MS));
    let more = false;
    for (const lane of LANES) {
      const n = await this.orm.em.fork().transactional(async (em) => {
        const rows = await claimScheduled(em, { ...lane, after, limit: CHUNK });
        const done: string[] = [];
        await Promise.all(
          rows.map(async (r) => {
            try {
              await startTimerRun(this.engine, this.opts, lane, r);
              // Its run's workflow id is the email id: claimed_by stays as it is.
              done.push(r.id);
            } catch (err) {
              this.log.error({ err, emailId: r.id }, "could not start a scheduled message's timer; retried on the next pass");
            }
          }),
        );
        await markEnqueued(em, done, new Date());
        return rows.length;
      });
      if (n >= CHUNK) more = true;
    }
    return more;
  }

  /**
   * What the send rate's current window has left for a live lane (null: no rate, or test mail).
   * A lane the rate holds back claims only that much: claiming and reserving a whole chunk to
   * start a window's few would lock and re-lock the same waiting rows every pass, work that
   * slowed everything else writing mail (a broadcast's fan-out, measured: 25% of its store time).
   * A chunk that parks some of its rows turns this off for the rest of the lane's pass (above), so
   * a capped backlog is still parked a whole chunk at a time.
   */
  private async rateRoom(lane: Lane): Promise<number | null> {
    const rate = this.opts.sendRatePerSecond;
    if (lane.mode !== 'live' || rate === undefined) return null;
    const w = rateWindows(rate);
    return sendRateRoom(this.orm, { windowNo: rateWindowNo(w), limit: w.limit });
  }

  /** Messages per run: one with a confirmation window (its run waits at `sent`, signalled by email id). */
  private perRun(): number {
    return (this.opts.confirmationWindowMs ?? 0) > 0 ? 1 : (this.opts.messagesPerRun ?? MESSAGES_PER_RUN);
  }

  /**
   * Claims up to `limit` of a lane, reserves the live ones against the caps and the send rate,
   * starts what may go and marks it, in one transaction. Messages the rate's window had no room
   * for stay unmarked (and keep their reservation): the next pass takes them first.
   */
  private async chunk(
    lane: Lane,
    now: Date,
    limit: number,
  ): Promise<{ claimed: number; runs: number; parked: number; throttled: boolean }> {
    return this.orm.em.fork().transactional(async (em) => {
      const claimed = await claimOutbox(em, { ...lane, now, limit });
      if (claimed.length === 0) return { claimed: 0, runs: 0, parked: 0, throttled: false };
      // Test mail never touches the caps or the rate; live mail starts only with its allowances reserved.
      const live = lane.mode === 'live';
      const admitted = live && this.opts.caps ? new Set(await this.opts.caps.admit(em, claimed, now)) : null;
      let rows = admitted ? claimed.filter((r) => admitted.has(r.id)) : claimed;
      let throttled = false;
      const rate = this.opts.sendRatePerSecond;
      if (live && rate !== undefined && rows.length > 0) {
        const w = rateWindows(rate);
        const granted = await takeSendRate(em, { windowNo: rateWindowNo(w), limit: w.limit, want: rows.length });
        throttled = granted < rows.length;
        rows = rows.slice(0, granted);
      }
      // Every message gets a run, even one canceled meanwhile: its claim then leaves it alone.
      const done: string[] = [];
      const runIds: string[] = [];
      const runs = runsOf(rows, this.perRun());
      await Promise.all(
        runs.map(async (run) => {
          try {
            const runId = await startRun(this.engine, this.log, this.opts, run);
            done.push(...run.map((r) => r.id));
            runIds.push(...run.map(() => runId));
          } catch (err) {
            this.log.error({ err, emailIds: run.length, firstEmailId: run[0].id }, 'could not start delivery; retried on the next pass');
          }
        }),
      );
      await markEnqueued(em, done, new Date(), runIds);
      return { claimed: claimed.length, runs: runs.length, parked: admitted ? claimed.length - admitted.size : 0, throttled };
    });
  }

  async stop(): Promise<void> {
    await this.poller.stop();
  }
}
