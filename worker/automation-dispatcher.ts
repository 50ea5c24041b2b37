import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { clearWake, consumeTriggers, markRunsStarted, purgeConsumedTriggers, unstartedRuns, wokenRuns } from '../db/sql/automation-outbox';
import { AUTOMATION_WAKE_SIGNAL, automationRun, automationRunWorkflowId } from '../workflows/automation-run';
import type { Clock } from '../core/clock';
import type { Engine } from './engine';
import { Poller } from './poller';

const PAGE = 200;
/** Starts in flight at once. */
const START_CONCURRENCY = 8;
/** How long consumed trigger rows stay, and how often the ones past that are removed. */
const TRIGGER_RETENTION_MS = 24 * 3600_000;
const PURGE_EVERY_MS = 3600_000;

/**
 * Moves automation work from PostgreSQL to the engine (db/sql/automation-outbox.ts): trigger rows
 * become runs, committed runs are started, woken runs are signalled. Kicked by POST /events,
 * contact writes and cancels; a pass every second besides for what other processes or a crash left.
 */
export class AutomationDispatcher {
  private readonly poller: Poller;
  private purgedAt = 0;

  constructor(
    private readonly orm: Orm,
    private readonly engine: Engine,
    private readonly clock: Clock,
    private readonly log: Logger,
    intervalMs = 1000,
  ) {
    this.poller = new Poller({ name: 'automation-dispatcher', intervalMs, coalesceMs: 2, log, pass: () => this.pass() });
  }

  start(): void {
    this.poller.start();
  }

  kick(): void {
    this.poller.kick();
  }

  private async pass(): Promise<{ more: boolean }> {
    const triggers = await consumeTriggers(this.orm, PAGE, this.clock.now());
    if (Date.now() - this.purgedAt > PURGE_EVERY_MS) {
      this.purgedAt = Date.now();
      const purged = await purgeConsumedTriggers(this.orm, new Date(this.clock.now().getTime() - TRIGGER_RETENTION_MS));
      if (purged) this.log.info({ purged }, 'consumed automation triggers removed');
    }
    const due = await unstartedRuns(this.orm, PAGE, this.clock.now());
    const started: { id: string; segment: number }[] = [];
    // A few at a time: each start is a burst of engine writes, and a page of them at once only
    // queues on the engine's connection pool.
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(START_CONCURRENCY, due.length) }, async () => {
        while (next < due.length) {
          const run = due[next++];
          try {
            await this.engine.start(
              automationRun,
              automationRunWorkflowId(run.id, run.segment),
              { runId: run.id, segment: run.segment },
              { labels: { organizations: [run.organization_id] } },
            );
            started.push({ id: run.id, segment: run.segment });
          } catch (err) {
            this.log.error({ err, runId: run.id }, 'could not start an automation run; retried on the next pass');
          }
        }
      }),
    );
    if (started.length) await markRunsStarted(this.orm, started, this.clock.now());
    const woken = await wokenRuns(this.orm, PAGE);
    let signalled = 0;
    for (const w of woken) {
      try {
        // A run not started yet (or parked) reads the database when it begins: nothing to signal. Each wake is
        // its own occurrence (a resume, then a cancel, are two signals).
        if (w.started)
          await this.engine.signal(automationRunWorkflowId(w.id, w.segment), AUTOMATION_WAKE_SIGNAL, new Date(w.wake_at).toISOString());
        await clearWake(this.orm, w.id, w.wake_at);
        signalled++;
      } catch (err) {
        this.log.error({ err, runId: w.id }, 'could not wake an automation run; retried on the next pass');
      }
    }
    return {
      more:
        (triggers.consumed === PAGE || due.length === PAGE || woken.length === PAGE) &&
        started.length === due.length &&
        signalled === woken.length,
    };
  }

  stop(): Promise<void> {
    return this.poller.stop();
  }
}
