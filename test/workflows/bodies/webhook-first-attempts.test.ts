import assert from 'node:assert/strict';
import type { WorkflowContext } from '../../../workflows/context';
import { WEBHOOK_RETRY_DELAYS_MS } from '../../../workflows/webhook-delivery';
import { webhookFirstAttemptsWorkflow, type WebhookFirstAttemptsActivities } from '../../../workflows/webhook-first-attempts';

describe('Workflow body: WebhookFirstAttempts', () => {
  it("makes every first attempt in one activity call, with the schedule's first delay for the hand-back", async () => {
    const calls: unknown[] = [];
    const ctx: WorkflowContext<WebhookFirstAttemptsActivities> = {
      now: async () => 0,
      sleepUntil: async () => assert.fail('a batch never waits'),
      waitForSignal: async () => assert.fail('a batch never waits'),
      activities: {
        attemptWebhookBatch: async (req) => {
          calls.push(req);
          return { succeeded: 2, failed: 0, handedBack: 1, skipped: 0 };
        },
      },
    };
    const deliveries = [1, 2, 3].map((i) => ({ deliveryId: `d${i}`, run: 1 }));
    assert.deepEqual(await webhookFirstAttemptsWorkflow(ctx, { deliveries }), { succeeded: 2, failed: 0, handedBack: 1, skipped: 0 });
    assert.deepEqual(calls, [{ deliveries, retryInMs: WEBHOOK_RETRY_DELAYS_MS[0] }]);
    // On Temporal the workflow's time goes with it: the hand-back's next_attempt_at is reckoned from it.
    await webhookFirstAttemptsWorkflow({ ...ctx, activityTime: () => 42 }, { deliveries });
    assert.deepEqual(calls[1], { deliveries, retryInMs: WEBHOOK_RETRY_DELAYS_MS[0], atMs: 42 });
  });
});
