import type { WorkflowContext } from './context';
import { defineWorkflow, DATABASE_ACTIVITY, type ActivityDef } from './definition';

export const WEBHOOK_DELIVERY_WORKFLOW = 'WebhookDelivery';
/**
 * Sent to a run a manual retry superseded: it wakes from its wait at once, and its next attempt
 * finds the delivery in a newer run and stops.
 */
export const WAKE_SIGNAL = 'wake';

/** One run per delivery and run number: a manual retry or `recover` starts the next run. */
export const webhookDeliveryWorkflowId = (deliveryId: string, run: number) => `webhook-delivery:${deliveryId}:${run}`;

/** Waits after a failed attempt, in order; after the last one fails the delivery is `failed`. */
export const WEBHOOK_RETRY_DELAYS_MS = [
  5_000, // 5 s
  300_000, // 5 min
  1_800_000, // 30 min
  7_200_000, // 2 h
  18_000_000, // 5 h
  36_000_000, // 10 h
  36_000_000, // 10 h
];

export interface WebhookDeliveryInput {
  deliveryId: string;
  run: number;
  /**
   * A delivery whose first attempt a WebhookFirstAttempts batch made: the attempts made so far
   * (its schedule goes on from there), and when the next one is due. Absent: from the first.
   */
  fromAttempt?: number;
  nextAttemptAtMs?: number;
}

// The activity contract: activities/webhook-delivery.ts implements it.
export interface AttemptRequest {
  deliveryId: string;
  run: number;
  /** How long to wait before the next attempt if this one fails; null: this is the last attempt. */
  retryInMs: number | null;
  /**
   * The workflow's time at this attempt (ctx.activityTime): the next attempt is due `retryInMs`
   * after it, and the endpoint's 5 days of failures are reckoned in it, so the schedule the
   * workflow waits out is the workflow's own (under a time-skipping test server too). Absent
   * (embedded engine, histories from before it): the database's now(), as before.
   */
  atMs?: number;
}

export type AttemptResult =
  /** A 2xx came back. */
  | { outcome: 'succeeded' }
  /** It failed and the next attempt is due then (recorded on the delivery as next_attempt_at). */
  | { outcome: 'retry'; nextAttemptAtMs: number }
  /** It failed for good: the last attempt, a 410 (endpoint disabled), or the endpoint is disabled. */
  | { outcome: 'failed' }
  /** Nothing to do: a newer run took the delivery over, or its endpoint was deleted. */
  | { outcome: 'stopped' };

export interface WebhookDeliveryActivities {
  /** One signed POST, recorded on the delivery (and its endpoint) in one statement. */
  attemptWebhookDelivery(req: AttemptRequest): Promise<AttemptResult>;
}

export const webhookDeliveryActivityDefs: Record<keyof WebhookDeliveryActivities, ActivityDef> = {
  // A failed POST is an outcome, not an error; only the database can throw here.
  attemptWebhookDelivery: DATABASE_ACTIVITY,
};

export interface WebhookDeliveryResult {
  status: AttemptResult['outcome'];
  attempts: number;
}

/**
 * One delivery from its first attempt to `succeeded` or `failed`: attempt, and after a failure
 * wait the next delay of the schedule. Whether an attempt still applies (the delivery pending
 * in this run, its endpoint enabled) is decided by the attempt's statement, never here.
 */
export async function webhookDeliveryWorkflow(
  ctx: WorkflowContext<WebhookDeliveryActivities>,
  input: WebhookDeliveryInput,
): Promise<WebhookDeliveryResult> {
  const first = input.fromAttempt ?? 0;
  // Handed back after a failed first attempt: wait out the schedule's delay before the next.
  if (first > 0 && input.nextAttemptAtMs !== undefined) await ctx.waitForSignal(WAKE_SIGNAL, input.nextAttemptAtMs);
  for (let attempt = first; ; attempt++) {
    const retryInMs = WEBHOOK_RETRY_DELAYS_MS[attempt] ?? null;
    const at = ctx.activityTime?.();
    const result = await ctx.activities.attemptWebhookDelivery({
      deliveryId: input.deliveryId,
      run: input.run,
      retryInMs,
      ...(at !== undefined ? { atMs: at } : {}),
    });
    if (result.outcome !== 'retry') return { status: result.outcome, attempts: attempt + 1 };
    // A newer run wakes this one early; its next attempt then stops.
    await ctx.waitForSignal(WAKE_SIGNAL, result.nextAttemptAtMs);
  }
}

export const webhookDelivery = defineWorkflow({
  name: WEBHOOK_DELIVERY_WORKFLOW,
  body: webhookDeliveryWorkflow,
  activities: webhookDeliveryActivityDefs,
  signals: [WAKE_SIGNAL],
  // Unqueued: a run mostly waits between attempts, and a queue slot held through a 10 h wait
  // would let one dead endpoint stall every other. The dispatcher bounds how many start.
  queue: null,
});
