import { AsyncResource } from 'node:async_hooks';
import type { Logger } from 'pino';

/** What one pass asks of the loop. */
export interface PassResult {
  /** Work is left that the pass could not take: run again at once. */
  more?: boolean;
  /** Waiting for room: look again after this long, and hold kicks until then. */
  backoffMs?: number;
}

export interface PollerOptions {
  /** Names the loop in logs. */
  name: string;
  /** A pass now and then even without kicks: picks up whatever other processes or a crash left. */
  intervalMs: number;
  /** Kicks within this window share one pass, so a pass takes many items. */
  coalesceMs?: number;
  pass: () => Promise<PassResult | void>;
  log: Logger;
}

/**
 * The one background loop of the service (outbox, domain sweep, worker heartbeat and takeover):
 * one pass at a time, a pass every interval, `kick()` for a pass soon, a failed pass logged and
 * retried on the next tick, and `stop()` waiting for the pass in flight.
 */
export class Poller {
  private timer?: NodeJS.Timeout;
  private soon?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  private stopped = false;
  private backoffUntil = 0;

  /**
   * Passes run in the context the poller was made in, not in the caller's of `kick()`: a kick
   * from inside a workflow step would otherwise carry that step's context (AsyncLocalStorage
   * follows timers) into the pass, and the engine refuses to start workflows from a step.
   */
  private readonly scope = new AsyncResource('poller');

  constructor(private readonly opts: PollerOptions) {}

  start(): void {
    this.schedule(0);
  }

  /** Asks for a pass within a few milliseconds (or when a backoff ends); kicks in between coalesce. */
  kick(): void {
    if (this.stopped || this.soon) return;
    this.soon = setTimeout(
      () => {
        this.soon = undefined;
        this.run();
      },
      Math.max(this.opts.coalesceMs ?? 0, this.backoffUntil - Date.now()),
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.soon) clearTimeout(this.soon);
    await this.running;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), ms);
    this.timer.unref();
  }

  private run(): void {
    this.scope.runInAsyncScope(() => this.runPass());
  }

  private runPass(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      let backoffMs: number | undefined;
      try {
        do {
          this.again = false;
          let result: PassResult | void;
          do result = await this.opts.pass();
          while (result?.more && !this.stopped);
          backoffMs = result?.backoffMs;
        } while (this.again && backoffMs === undefined && !this.stopped);
      } catch (err) {
        this.opts.log.error({ err, loop: this.opts.name }, 'background pass failed; retrying on the next tick');
      } finally {
        this.running = undefined;
        this.backoffUntil = backoffMs !== undefined ? Date.now() + backoffMs : 0;
        this.schedule(backoffMs ?? this.opts.intervalMs);
      }
    })();
  }
}
