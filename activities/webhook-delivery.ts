import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import type { Clock } from '../core/clock';
import type { Secrets } from '../core/secrets';
import { webhookHeaders } from '../core/webhooks/sign';
import { loadWebhookAttempt, recordWebhookAttempt } from '../db/sql/webhook-attempt';
import type { AttemptResult, WebhookDeliveryActivities } from '../workflows/webhook-delivery';
import type { FirstAttemptsResult, WebhookFirstAttemptsActivities } from '../workflows/webhook-first-attempts';
import type { WebhookPoster } from './webhook-http';

export interface WebhookDeliveryDeps {
  orm: Orm;
  webhooks: WebhookPoster;
  /** Opens the endpoints' signing secrets. */
  secrets: Secrets;
  clock: Clock;
  log: Logger;
  /** Called after each attempt is recorded: an endpoint's window has room again (the dispatcher's kick). */
  afterWebhookAttempt?: () => void;
}

type Activities = WebhookDeliveryActivities & WebhookFirstAttemptsActivities;

export function createWebhookDeliveryActivities(deps: WebhookDeliveryDeps): Activities {
  const { orm, webhooks, secrets, clock, log, afterWebhookAttempt } = deps;

  /**
   * One attempt of a delivery in a run: load, sign, POST, record (one statement each side).
   * `firstOnly` (a batch): skipped when the run already made an attempt (the step ran again after
   * a crash), and a failure with attempts left is handed back to the dispatcher.
   */
  async function attempt(
    deliveryId: string,
    run: number,
    retryInMs: number | null,
    firstOnly: boolean,
    atMs: number | undefined,
  ): Promise<AttemptResult | 'skipped'> {
    const row = await loadWebhookAttempt(orm, deliveryId);
    if (!row || row.run !== run || row.status !== 'pending') return { outcome: 'stopped' };
    if (firstOnly && row.run_attempts > 0) return 'skipped';
    // The workflow's time when it sent one (Temporal): the schedule and the failure streak follow
    // the clock the workflow waits on where it runs ahead of this worker's (a time-skipping
    // server). Never behind this worker's: the attempt may start well after the workflow task
    // (queued behind its endpoint's concurrency, or retried), and the next one is due after it.
    const at = atMs === undefined ? null : new Date(Math.max(atMs, clock.now().getTime()));
    const base = { deliveryId, run, gone: false, statusCode: null, response: null, handBack: firstOnly, at };
    if (!row.enabled) {
      // Disabled since the event: nothing is sent; `recover` re-queues it after re-enabling.
      const rec = await recordWebhookAttempt(orm, {
        ...base,
        attempted: false,
        succeeded: false,
        error: 'the endpoint is disabled',
        retryInMs: null,
      });
      afterWebhookAttempt?.();
      return rec ? { outcome: 'failed' } : { outcome: 'stopped' };
    }
    // Compact, in the stored key order: the same bytes on every attempt (PostgreSQL's json text has spaces).
    const body = JSON.stringify(JSON.parse(row.body));
    const signing = [secrets.decrypt(row.secret_enc), ...(row.previous_secret_enc ? [secrets.decrypt(row.previous_secret_enc)] : [])];
    // webhook-id = the delivery id: the same on every retry of it, and what GET .../deliveries lists.
    const headers = webhookHeaders(signing, deliveryId, Math.floor(clock.now().getTime() / 1000), body);
    const out = await webhooks.post(row.endpoint_id, row.url, headers, body);
    const succeeded = out.statusCode !== null && out.statusCode >= 200 && out.statusCode < 300;
    const rec = await recordWebhookAttempt(orm, {
      ...base,
      attempted: true,
      succeeded,
      gone: out.statusCode === 410,
      statusCode: out.statusCode,
      error: succeeded ? null : (out.error ?? `HTTP ${out.statusCode}`),
      response: out.statusCode === null ? null : out.body,
      retryInMs,
    });
    afterWebhookAttempt?.();
    if (!rec) return { outcome: 'stopped' };
    if (rec.disabled) log.warn({ endpointId: rec.endpoint_id, reason: rec.disabled }, 'webhook endpoint disabled');
    if (rec.status === 'succeeded') return { outcome: 'succeeded' };
    if (rec.status === 'failed' || rec.next_attempt_ms === null) return { outcome: 'failed' };
    return { outcome: 'retry', nextAttemptAtMs: rec.next_attempt_ms };
  }

  return {
    async attemptWebhookDelivery({ deliveryId, run, retryInMs, atMs }): Promise<AttemptResult> {
      const result = await attempt(deliveryId, run, retryInMs, false, atMs);
      return result === 'skipped' ? { outcome: 'stopped' } : result;
    },

    async attemptWebhookBatch({ deliveries, retryInMs, atMs }): Promise<FirstAttemptsResult> {
      const tally: FirstAttemptsResult = { succeeded: 0, failed: 0, handedBack: 0, skipped: 0 };
      // All at once: the poster holds each endpoint to its concurrency, so a slow endpoint's
      // deliveries queue behind each other and never behind another endpoint's.
      await Promise.all(
        deliveries.map(async (d) => {
          const r = await attempt(d.deliveryId, d.run, retryInMs, true, atMs);
          if (r === 'skipped' || r.outcome === 'stopped') tally.skipped += 1;
          else if (r.outcome === 'succeeded') tally.succeeded += 1;
          else if (r.outcome === 'failed') tally.failed += 1;
          else tally.handedBack += 1;
        }),
      );
      return tally;
    },
  };
}
