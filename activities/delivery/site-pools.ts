import type { Clock } from '../../core/clock';
import type { SiteLimits } from '../../core/delivery/shaping';
import { Session, type Delivered, type SessionError, type SessionOptions, type SessionTarget } from './smtp-session';

/** A (source IP, site) left alone until `until`, because of `reply`. */
export interface Suspension {
  until: Date;
  reply: string;
}

/** One message's try on one MX address: sent (maybe partly), refused, not connected, or not tried. */
export type Attempt =
  | { target: SessionTarget; sent: Delivered; fresh: Session | null }
  | { target: SessionTarget; refused: SessionError; fresh: Session | null }
  | { target: SessionTarget; unreachable: SessionError }
  | { suspended: Suspension };

type Grant = { session: Session } | { open: true } | { replace: Session } | { suspended: Suspension };

const MINUTE_MS = 60_000;
/** How long a connection may wait for the site's next message before it is closed. */
export const IDLE_MS = 5_000;
// Longest sleep while a message waits for room in the minute: a test's stepped clock is re-read this often.
const RATE_POLL_MS = 1_000;
/**
 * Longest a message waits in memory for room at a site (the minute's rate or a connection): past
 * it, the host counts as unreachable for now and the message is deferred to wait in its row, so a
 * pass never outlives its activity's time limit (and is never run twice while still sending).
 */
export const MAX_WAIT_MS = 60_000;

const busy = (why: string): SessionError => Object.assign(new Error(`site busy: ${why} within ${MAX_WAIT_MS / 1000} s`), { code: 'EBUSY' });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The connections of one source IP to one site, and its limits (issue 40): at most `connections`
 * sockets exist at once, counted from the moment one is opened until its socket is gone (so the
 * site never sees one more, even while an old one closes); each carries at most
 * `messagesPerConnection` messages; at most `perMinute` messages start in a sliding minute. A
 * message waits in memory for room, first come first served. Connections are kept between
 * messages, per MX address and TLS mode, and one idle to another host of the site is closed to
 * make room when the cap is reached.
 */
export class SitePool {
  private slots = 0;
  private readonly idle: Session[] = [];
  private readonly idleTimers = new Map<Session, NodeJS.Timeout>();
  private readonly watched = new WeakSet<Session>();
  private readonly waiters: { keys: string[]; grant: (g: Grant) => void }[] = [];
  private readonly window: number[] = [];
  private suspension: Suspension | null = null;
  private shut = false;

  constructor(
    readonly limits: SiteLimits,
    private readonly clock: Clock,
  ) {}

  /** The suspension in force now, if any. */
  suspendedNow(): Suspension | null {
    return this.suspension && this.suspension.until > this.clock.now() ? this.suspension : null;
  }

  /** Leaves the site alone for its suspendMinutes: idle connections close, waiting messages are answered. */
  suspend(reply: string): Suspension {
    const until = new Date(this.clock.now().getTime() + this.limits.suspendMinutes * MINUTE_MS);
    this.suspension = { until, reply };
    for (const s of this.idle.splice(0)) this.retire(s);
    this.pump();
    return this.suspension;
  }

  /**
   * One transaction on any of `targets` (equally good: one MX preference level): over an idle
   * connection to one of them, or a new one to the first.
   */
  async run(targets: SessionTarget[], o: SessionOptions, envelope: { from: string; to: string[] }, raw: Buffer): Promise<Attempt> {
    const deadline = Date.now() + MAX_WAIT_MS;
    const held = await this.admit(deadline);
    if (held === 'late') return { target: targets[0], unreachable: busy('no room in its rate') };
    if (held) return { suspended: held };
    const keys = targets.map((t) => Session.keyOf(t));
    for (let retried = false; ; retried = true) {
      const grant = await this.acquire(keys, deadline);
      if ('late' in grant) return { target: targets[0], unreachable: busy('no free connection') };
      if ('suspended' in grant) return grant;
      let session: Session;
      let fresh: Session | null = null;
      let target = targets[0];
      if ('session' in grant) {
        session = grant.session;
        target = session.target;
      } else {
        if ('replace' in grant) await grant.replace.close();
        const opened = await Session.open(target, o);
        if ('error' in opened) {
          await opened.closed;
          this.freeSlot();
          return { target, unreachable: opened.error };
        }
        session = fresh = opened.session;
      }
      try {
        const sent = await session.send(envelope, raw);
        this.release(session, true);
        return { target, sent, fresh };
      } catch (e) {
        const err = e as SessionError;
        // A kept connection the server had dropped meanwhile says nothing of this message: once more, on a new one.
        if (!fresh && !retried && !session.alive && err.responseCode === undefined) {
          this.release(session, false);
          continue;
        }
        const refusal = (err.code === 'EENVELOPE' || err.code === 'EMESSAGE') && err.responseCode !== 421;
        this.release(session, refusal && (await session.reset()));
        return { target, refused: err, fresh };
      }
    }
  }

  /** Closes every idle connection; those in use close when their transaction ends. */
  close(): void {
    this.shut = true;
    for (const s of this.idle.splice(0)) this.retire(s);
  }

  /** Room in the sliding minute, or the suspension that began while waiting for it. */
  private async admit(deadline: number): Promise<Suspension | null | 'late'> {
    for (;;) {
      const held = this.suspendedNow();
      if (held) return held;
      if (Date.now() > deadline) return 'late';
      const now = this.clock.now().getTime();
      while (this.window.length > 0 && this.window[0] <= now - MINUTE_MS) this.window.shift();
      if (this.window.length < this.limits.perMinute) {
        this.window.push(now);
        return null;
      }
      await sleep(Math.min(Math.max(this.window[0] + MINUTE_MS - now, 10), RATE_POLL_MS));
    }
  }

  private acquire(keys: string[], deadline: number): Promise<Grant | { late: true }> {
    return new Promise((resolve) => {
      const waiter = {
        keys,
        grant: (g: Grant) => {
          clearTimeout(timer);
          resolve(g);
        },
      };
      // Still waiting at the deadline: leaves the queue unserved (pump hands out synchronously, so it never holds a grant).
      const timer = setTimeout(
        () => {
          const i = this.waiters.indexOf(waiter);
          if (i >= 0) {
            this.waiters.splice(i, 1);
            resolve({ late: true });
          }
        },
        Math.max(deadline - Date.now(), 0),
      );
      timer.unref();
      this.waiters.push(waiter);
      this.pump();
    });
  }

  /** Hands out what can be handed out, to the longest-waiting first; decided synchronously, so no two take one slot. */
  private pump(): void {
    while (this.waiters.length > 0) {
      const w = this.waiters[0];
      const held = this.suspendedNow();
      const i = this.idle.findIndex((s) => w.keys.includes(s.key));
      let g: Grant;
      if (held) g = { suspended: held };
      else if (i >= 0) g = { session: this.takeIdle(i) };
      else if (this.slots < this.limits.connections) {
        this.slots += 1;
        g = { open: true };
      } else if (this.idle.length > 0) g = { replace: this.takeIdle(0) };
      else return;
      this.waiters.shift();
      w.grant(g);
    }
  }

  private takeIdle(i: number): Session {
    const [s] = this.idle.splice(i, 1);
    clearTimeout(this.idleTimers.get(s));
    this.idleTimers.delete(s);
    return s;
  }

  private release(s: Session, reusable: boolean): void {
    if (!reusable || !s.alive || this.shut || this.suspendedNow() || s.messages >= this.limits.messagesPerConnection) {
      return this.retire(s);
    }
    this.idle.push(s);
    const timer = setTimeout(() => {
      const i = this.idle.indexOf(s);
      if (i >= 0) this.retire(this.takeIdle(i));
    }, IDLE_MS);
    timer.unref();
    this.idleTimers.set(s, timer);
    if (!this.watched.has(s)) {
      this.watched.add(s);
      // The server may end a kept connection itself; its slot is free once the socket is gone.
      void s.closed.then(() => {
        const i = this.idle.indexOf(s);
        if (i >= 0) {
          this.takeIdle(i);
          this.freeSlot();
        }
      });
    }
    this.pump();
  }

  private retire(s: Session): void {
    void s.close().then(() => this.freeSlot());
  }

  private freeSlot(): void {
    this.slots -= 1;
    this.pump();
  }
}
