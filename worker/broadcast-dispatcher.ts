import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { markBroadcastStarted, unstartedBroadcasts } from '../db/sql/claim-broadcasts';
import { broadcastFanOut, broadcastWorkflowId } from '../workflows/broadcast';
import type { Engine } from './engine';
import { Poller } from './poller';

/**
 * Starts the fan-out run of each broadcast the API committed (kicked after each creation, and a
 * pass every few seconds for what another process or a crash left). Starting a run that exists is
 * a no-op on both engines, so a claim whose start was lost is safe to start again.
 */
export class BroadcastDispatcher {
  private readonly poller: Poller;

  constructor(
    private readonly orm: Orm,
    private readonly engine: Engine,
    private readonly log: Logger,
    intervalMs = 5000,
  ) {
    this.poller = new Poller({ name: 'broadcast-dispatcher', intervalMs, log, pass: () => this.pass() });
  }

  start(): void {
    this.poller.start();
  }

  kick(): void {
    this.poller.kick();
  }

  private async pass(): Promise<{ more: boolean }> {
    const due = await unstartedBroadcasts(this.orm, 50);
    let started = 0;
    for (const b of due) {
      try {
        await this.engine.start(
          broadcastFanOut,
          broadcastWorkflowId(b.id),
          { broadcastId: b.id, scheduledAtMs: b.scheduled_at ? new Date(b.scheduled_at).getTime() : null },
          { labels: { organizations: [b.organization_id] } },
        );
        await markBroadcastStarted(this.orm, b.id, new Date());
        started++;
      } catch (err) {
        this.log.error({ err, broadcastId: b.id }, 'could not start a broadcast fan-out; retried on the next pass');
      }
    }
    return { more: due.length === 50 && started === due.length };
  }

  stop(): Promise<void> {
    return this.poller.stop();
  }
}
