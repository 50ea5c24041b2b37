import pg from 'pg';
import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { claimWebhookDeliveries, unclaimWebhookDeliveries } from '../db/sql/claim-webhook-deliveries';
import { webhookDelivery, webhookDeliveryWorkflowId, type WebhookDeliveryInput } from '../workflows/webhook-delivery';
import { webhookFirstAttempts, type WebhookFirstAttemptsInput } from '../workflows/webhook-first-attempts';
import { uuidv7 } from '../db/ids';
import type { Engine } from './engine';
import { Poller } from './poller';

/** Most runs one pass starts. */
const BATCH = 500;
/** A pass now and then without a notification: covers a dropped LISTEN connection. */
const SAFETY_POLL_MS = 1000;
/** Notifications within this window share one pass. */
const COALESCE_MS = 5;
/** After the LISTEN connection broke, how soon to open it again. */
const RELISTEN_MS = 1000;

/** Runs of one endpoint started and due at once, per POST slot: enough queued behind each slot to keep it busy. */
const WINDOW_PER_SLOT = 16;

export interface WebhookDispatcherOptions {
  /** POSTs in flight at once per endpoint (WEBHOOK_CONCURRENCY); the window is this × WINDOW_PER_SLOT. */
  concurrencyPerEndpoint: number;
}

/**
 * The webhook outbox. The fan-out triggers insert deliveries in the transaction that recorded
 * their event and NOTIFY `svc_webhooks` at its commit; this LISTENs on its own connection, claims
 * the deliveries (db/sql/claim-webhook-deliveries.ts, which marks them started) and starts their
 * runs: one WebhookFirstAttempts batch for the first attempts, a WebhookDelivery run for each
 * delivery that is further along. A run that fails to start is given back at once; one lost to a
 * crash is claimed again when long overdue. Starting a run twice is a no-op (the workflow id
 * names delivery and run).
 */
export class WebhookDispatcher {
  private readonly poller: Poller;
  private listener?: pg.Client;
  private relisten?: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly orm: Orm,
    private readonly databaseUrl: string,
    private readonly engine: Engine,
    private readonly log: Logger,
    private readonly opts: WebhookDispatcherOptions,
  ) {
    this.poller = new Poller({
      name: 'webhook-dispatcher',
      intervalMs: SAFETY_POLL_MS,
      coalesceMs: COALESCE_MS,
      log,
      pass: async () => ({ more: (await this.runOnce()) === BATCH }),
    });
  }

  async start(): Promise<void> {
    await this.listen();
    this.poller.start();
  }

  kick(): void {
    this.poller.kick();
  }

  /**
   * One claim-and-start pass; answers how many deliveries it claimed. First attempts go out in
   * WebhookFirstAttempts batches (one run and one durable step for up to BATCH deliveries); a
   * delivery handed back after a failed first attempt, or claimed again after a crash, gets its
   * own WebhookDelivery run from the attempt it is at.
   */
  async runOnce(): Promise<number> {
    const rows = await claimWebhookDeliveries(this.orm, this.opts.concurrencyPerEndpoint * WINDOW_PER_SLOT, BATCH);
    const failed: string[] = [];
    const first = rows.filter((d) => d.run_attempts === 0);
    const later = rows.filter((d) => d.run_attempts > 0);
    const starts = later.map(async (d) => {
      const input: WebhookDeliveryInput = {
        deliveryId: d.id,
        run: d.run,
        fromAttempt: d.run_attempts,
        ...(d.next_attempt_ms !== null ? { nextAttemptAtMs: d.next_attempt_ms } : {}),
      };
      try {
        await this.engine.start(webhookDelivery, webhookDeliveryWorkflowId(d.id, d.run), input, {
          labels: { organizations: [d.organization_id] },
        });
      } catch (err) {
        failed.push(d.id);
        this.log.error({ err, deliveryId: d.id }, 'could not start WebhookDelivery; retried on the next pass');
      }
    });
    if (first.length > 0) {
      starts.push(
        (async () => {
          const input: WebhookFirstAttemptsInput = { deliveries: first.map((d) => ({ deliveryId: d.id, run: d.run })) };
          try {
            // A fresh id per batch: a delivery claimed again (after a crash) is in a new batch, never a no-op start.
            await this.engine.start(webhookFirstAttempts, `webhook-first:${uuidv7()}`, input, {
              labels: { organizations: first.map((d) => d.organization_id) },
            });
          } catch (err) {
            failed.push(...first.map((d) => d.id));
            this.log.error({ err, deliveries: first.length }, 'could not start WebhookFirstAttempts; retried on the next pass');
          }
        })(),
      );
    }
    await Promise.all(starts);
    await unclaimWebhookDeliveries(this.orm, failed);
    return rows.length;
  }

  private async listen(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.databaseUrl, application_name: 'svc-webhook-listener' });
    const again = (err?: Error) => {
      if (this.listener !== client || this.stopped) return;
      this.listener = undefined;
      if (err) this.log.warn({ err }, 'webhook LISTEN connection lost; polling until it is back');
      client.end().catch(() => {});
      this.relisten = setTimeout(() => this.listen().catch(() => again()), RELISTEN_MS);
      this.relisten.unref();
    };
    this.listener = client;
    client.on('error', again);
    client.on('end', () => again());
    client.on('notification', () => this.poller.kick());
    try {
      await client.connect();
      await client.query('listen svc_webhooks');
    } catch (err) {
      again(err as Error);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.relisten) clearTimeout(this.relisten);
    const client = this.listener;
    this.listener = undefined;
    await client?.end().catch(() => {});
    await this.poller.stop();
  }
}
