import type { WorkflowContext } from './context';
import { defineWorkflow, LONG_ATTEMPT_SECONDS, type ActivityDef } from './definition';
import { WEBHOOK_RETRY_DELAYS_MS } from './webhook-delivery';

export const WEBHOOK_FIRST_ATTEMPTS_WORKFLOW = 'WebhookFirstAttempts';

/** A delivery in a batch: its id and the run the dispatcher claimed it for. */
export interface BatchedDelivery {
  deliveryId: string;
  run: number;
}

export interface WebhookFirstAttemptsInput {
  deliveries: BatchedDelivery[];
}

// The activity contract: activities/webhook-delivery.ts implements it.
export interface FirstAttemptsRequest {
  deliveries: BatchedDelivery[];
  /** The wait before a failed delivery's second attempt (recorded as its next_attempt_at). */
  retryInMs: number;
  /** The workflow's time (ctx.activityTime), as AttemptRequest.atMs; absent: the database's now(). */
  atMs?: number;
}

/** How the batch went; a failed first attempt is handed back to the dispatcher, not retried here. */
export interface FirstAttemptsResult {
  succeeded: number;
  /** Failed for good at once: a 410, or the endpoint is disabled. */
  failed: number;
  /** Failed and due again later: given back to the dispatcher, which starts a WebhookDelivery run for the rest. */
  handedBack: number;
  /** Nothing to do: attempted already (a step run again after a crash), superseded by a newer run, or deleted. */
  skipped: number;
}

export interface WebhookFirstAttemptsActivities {
  /** Each delivery's first attempt, concurrently (per endpoint at most WEBHOOK_CONCURRENCY), each recorded on its own. */
  attemptWebhookBatch(req: FirstAttemptsRequest): Promise<FirstAttemptsResult>;
}

export const webhookFirstAttemptsActivityDefs: Record<keyof WebhookFirstAttemptsActivities, ActivityDef> = {
  // On the workflow's task queue (its runs are unqueued). An attempt may take long: a batch to a
  // dead endpoint waits out 15 s timeouts. A failed POST is an outcome; only the database can
  // throw here, and a step run again skips the deliveries it already recorded: so it retries on
  // the database schedule, as a delivery pass does.
  attemptWebhookBatch: { runsOn: 'default', retry: 'database', timeoutSeconds: LONG_ATTEMPT_SECONDS },
};

/**
 * The first attempt of many deliveries in one durable step: most deliveries succeed at their
 * first POST, and one run with one step per delivery is what bounded the burst rate. A delivery
 * whose first attempt failed with retries left goes back to the dispatcher (its statement clears
 * `enqueued_at`), which continues it as a WebhookDelivery run from its second attempt.
 */
export async function webhookFirstAttemptsWorkflow(
  ctx: WorkflowContext<WebhookFirstAttemptsActivities>,
  input: WebhookFirstAttemptsInput,
): Promise<FirstAttemptsResult> {
  const at = ctx.activityTime?.();
  return ctx.activities.attemptWebhookBatch({
    deliveries: input.deliveries,
    retryInMs: WEBHOOK_RETRY_DELAYS_MS[0],
    ...(at !== undefined ? { atMs: at } : {}),
  });
}

export const webhookFirstAttempts = defineWorkflow({
  name: WEBHOOK_FIRST_ATTEMPTS_WORKFLOW,
  body: webhookFirstAttemptsWorkflow,
  activities: webhookFirstAttemptsActivityDefs,
  signals: [],
  // Unqueued, like WebhookDelivery: the dispatcher's per-endpoint windows bound how many start.
  queue: null,
});
