import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import type { Clock } from '../core/clock';
import { systemClock } from '../core/clock';
import { handBackStranded, openRunsPage } from '../db/sql/stranded-runs';
import { LONG_ATTEMPT_SECONDS } from '../workflows/definition';
import type { Engine } from './engine';
import { Poller } from './poller';

export interface StrandedRunOptions {
  log: Logger;
  clock?: Clock;
  /** Between passes (default a minute). */
  intervalMs?: number;
  /** How long a `queued` message's run may sit before it is asked after (default two minutes). */
  queuedGraceMs?: number;
  /** The same for a `sending` one: longer than an attempt may run (default LONG_ATTEMPT_SECONDS and a minute). */
  sendingGraceMs?: number;
  /** Messages per page (default 200). */
  pageSize?: number;
  /** Outbox kick: handed-back mail leaves at once. */
  onHandBack?: () => void;
}

const START = { at: new Date(0), id: '00000000-0000-0000-0000-000000000000' };
/** Runs asked after at once; describe calls are cheap, but a page may name two hundred. */
const CONCURRENCY = 8;

/**
 * Finds messages whose run ended without finishing them and hands them back to the outbox: an
 * operator terminated the run in the Temporal UI (no workflow code runs on a terminate), or reset
 * it to a point before its claim. The database says which messages a run holds (claimed_by, or the
 * run the outbox recorded); the engine says whether that run still runs. A run still running is
 * left alone whatever it waits for. One page a pass, the next pass goes on from where it ended, so
 * every open message is looked at in turn however many wait on long timers.
 */
export class StrandedRunSweep {
  private readonly poller: Poller;
  private readonly clock: Clock;
  private cursor = START;

  constructor(
    private readonly orm: Orm,
    private readonly engine: Engine,
    private readonly opts: StrandedRunOptions,
  ) {
    this.clock = opts.clock ?? systemClock;
    this.poller = new Poller({
      name: 'stranded-runs',
      intervalMs: opts.intervalMs ?? 60_000,
      log: opts.log,
      pass: async () => void (await this.runOnce()),
    });
  }

  /** Only on an engine whose runs an operator can end behind the service's back (Engine.runOpen). */
  start(): void {
    if (this.engine.runOpen) this.poller.start();
  }

  async stop(): Promise<void> {
    await this.poller.stop();
  }

  /** One page; answers how many messages went back to the outbox. */
  async runOnce(): Promise<number> {
    if (!this.engine.runOpen) return 0;
    const now = this.clock.now().getTime();
    const limit = this.opts.pageSize ?? 200;
    const page = await openRunsPage(this.orm, {
      after: this.cursor,
      queuedBefore: new Date(now - (this.opts.queuedGraceMs ?? 120_000)),
      sendingBefore: new Date(now - (this.opts.sendingGraceMs ?? (LONG_ATTEMPT_SECONDS + 60) * 1000)),
      limit,
    });
    const last = page.at(-1);
    this.cursor = page.length < limit || !last ? START : { at: new Date(last.updated_at), id: last.id };
    const byRun = new Map<string, string[]>();
    for (const r of page) byRun.set(r.run, [...(byRun.get(r.run) ?? []), r.id]);
    const runs = [...byRun.entries()];
    let handed = 0;
    for (let i = 0; i < runs.length; i += CONCURRENCY) {
      const counts = await Promise.all(runs.slice(i, i + CONCURRENCY).map(([run, ids]) => this.settle(run, ids)));
      handed += counts.reduce((a, b) => a + b, 0);
    }
    if (handed > 0) this.opts.onHandBack?.();
    return handed;
  }

  private async settle(run: string, ids: string[]): Promise<number> {
    try {
      if (await this.engine.runOpen!(run)) return 0;
    } catch (err) {
      this.opts.log.warn({ err, runId: run }, 'stranded-runs: could not ask the engine about a run; asked again next pass');
      return 0;
    }
    const back = await handBackStranded(this.orm, { run, ids, now: this.clock.now() });
    if (back.length > 0) {
      this.opts.log.warn(
        { runId: run, emails: back.length, firstEmailId: back[0] },
        'stranded-runs: a run ended without finishing its messages (terminated or reset by an operator); handed back to the outbox',
      );
    }
    return back.length;
  }
}
