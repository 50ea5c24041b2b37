import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { deleteFinishedWorkflows } from '../db/sql/engine-retention';
import { Poller } from './poller';

export interface EngineRetentionOptions {
  /** How long a finished workflow stays in the engine's tables after it finished; 0 keeps them all (start() does nothing). */
  retentionMs: number;
  log: Logger;
  /** Between sweeps. Default: a quarter of the retention, between 5 seconds and 5 minutes. */
  intervalMs?: number;
  /** Workflows per statement, each statement its own short transaction. */
  pageSize?: number;
}

const DEFAULT_PAGE_SIZE = 1_000;
const MIN_INTERVAL_MS = 5_000;
const MAX_INTERVAL_MS = 5 * 60_000;

/**
 * Deletes the embedded engine's finished workflows once they are older than the retention, with
 * their step records, inputs, outputs, messages and events (db/sql/engine-retention.ts). DBOS keeps
 * every workflow forever otherwise: each message sent leaves a workflow row and a row per step.
 *
 * Every process runs it: the statement locks the rows it takes and skips locked ones, so
 * sweeps that overlap share the work. A workflow id is reusable once deleted, so starting a run
 * whose id ran longer ago than the retention runs it again; every caller starts its runs within
 * moments of deciding to (and marks them started), so the retention only needs to exceed that.
 */
export class EngineRetention {
  private readonly poller: Poller;
  private readonly pageSize: number;
  private stopping = false;

  constructor(
    private readonly orm: Orm,
    private readonly opts: EngineRetentionOptions,
  ) {
    this.pageSize = opts.pageSize ?? DEFAULT_PAGE_SIZE;
    const intervalMs = opts.intervalMs ?? Math.min(MAX_INTERVAL_MS, Math.max(MIN_INTERVAL_MS, opts.retentionMs / 4));
    this.poller = new Poller({ name: 'engine-retention', intervalMs, log: opts.log, pass: async () => void (await this.sweep()) });
  }

  start(): void {
    if (this.opts.retentionMs > 0) this.poller.start();
  }

  /** One sweep, page after page until a page is short; returns the workflows deleted (0 when retention is off). */
  runOnce(): Promise<number> {
    return this.sweep();
  }

  async stop(): Promise<void> {
    // The sweep in flight ends after its current page instead of working through a backlog first.
    this.stopping = true;
    await this.poller.stop();
  }

  private async sweep(): Promise<number> {
    if (this.opts.retentionMs <= 0) return 0;
    const t0 = performance.now();
    const total = { workflows: 0, steps: 0, pages: 0 };
    for (;;) {
      const page = await deleteFinishedWorkflows(this.orm, this.opts.retentionMs, this.pageSize);
      total.workflows += page.workflows;
      total.steps += page.steps;
      total.pages += 1;
      // A short page means nothing old is left, or what is left is locked by another process's sweep.
      if (page.workflows < this.pageSize || this.stopping) break;
    }
    if (total.workflows > 0) {
      this.opts.log.info({ ...total, ms: Math.round(performance.now() - t0) }, 'finished workflows past the retention deleted');
    }
    return total.workflows;
  }
}
