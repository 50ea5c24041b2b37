import { LockMode } from '@mikro-orm/core';
import type { Orm } from '../db/orm';
import { Email } from '../db/entities';
import type { Engine, SendEmailJob } from './engine';
import type { Logger } from '../server/logger';

const BATCH = 200;
const SAFETY_POLL_MS = 1000;
const COALESCE_MS = 20;

/**
 * The outbox: the API's transaction stores a message with enqueued_at null and returns; this
 * starts its workflow. Rows are claimed FOR UPDATE SKIP LOCKED, so several processes can run
 * dispatchers on one database, and the mark is committed only after the start succeeded. A crash
 * between the two starts the workflow again, which is a no-op (workflow id = email id).
 */
export class Dispatcher {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private again = false;
  private stopped = false;

  constructor(private readonly orm: Orm, private readonly engine: Engine, private readonly log: Logger) {}

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.run();
      this.timer = setTimeout(tick, SAFETY_POLL_MS);
      this.timer.unref();
    };
    tick();
  }

  private soon?: NodeJS.Timeout;

  /** Asks for a run within a few milliseconds; kicks in between coalesce, so a pass starts many. */
  kick(): void {
    if (this.stopped || this.soon) return;
    this.soon = setTimeout(() => {
      this.soon = undefined;
      this.run();
    }, COALESCE_MS);
  }

  private run(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          while ((await this.runOnce()) === BATCH && !this.stopped);
        } while (this.again && !this.stopped);
      } catch (err) {
        this.log.error({ err }, 'dispatch failed; retrying on the next tick');
      } finally {
        this.running = undefined;
      }
    })();
  }

  /** One claim-start-mark pass; returns how many messages it started. */
  async runOnce(): Promise<number> {
    return this.orm.em.fork().transactional(async (em) => {
      const rows = await em.find(
        Email,
        { enqueuedAt: null },
        { fields: ['id', 'mode', 'scheduledAt'], orderBy: { createdAt: 'asc' }, limit: BATCH, lockMode: LockMode.PESSIMISTIC_PARTIAL_WRITE },
      );
      if (rows.length === 0) return 0;
      const jobs: SendEmailJob[] = rows.map((e) => ({ emailId: e.id, mode: e.mode, notBeforeMs: e.scheduledAt ? e.scheduledAt.getTime() : null }));
      const started: string[] = [];
      await Promise.all(
        jobs.map(async (job) => {
          try {
            await this.engine.startSendEmail(job);
            started.push(job.emailId);
          } catch (err) {
            this.log.error({ err, emailId: job.emailId }, 'could not start SendEmail; retried on the next pass');
          }
        }),
      );
      if (started.length) await em.nativeUpdate(Email, { id: { $in: started } }, { enqueuedAt: new Date() });
      return started.length;
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.soon) clearTimeout(this.soon);
    await this.running;
  }
}
