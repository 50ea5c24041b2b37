import assert from 'node:assert/strict';
import type { WorkflowContext } from '../../../workflows/context';
import {
  webhookDeliveryWorkflow,
  WAKE_SIGNAL,
  WEBHOOK_RETRY_DELAYS_MS,
  type WebhookDeliveryActivities,
  type WebhookDeliveryInput,
} from '../../../workflows/webhook-delivery';

describe('Workflow body: WebhookDelivery', () => {
  function run(
    outcomes: ('fail' | 'succeeded' | 'stopped' | 'gone')[],
    opts: { wakeAt?: number; input?: Partial<WebhookDeliveryInput>; activityTime?: boolean } = {},
  ) {
    let clock = 0;
    const waits: number[] = [];
    const asked: (number | null)[] = [];
    const stamps: (number | undefined)[] = [];
    const ctx: WorkflowContext<WebhookDeliveryActivities> = {
      now: async () => clock,
      ...(opts.activityTime ? { activityTime: () => clock } : {}),
      sleepUntil: async () => assert.fail('waits must be cancelable by the wake signal'),
      waitForSignal: async (name, deadline) => {
        assert.equal(name, WAKE_SIGNAL);
        const woken = opts.wakeAt !== undefined && opts.wakeAt < deadline && opts.wakeAt >= clock;
        waits.push((woken ? opts.wakeAt! : deadline) - clock);
        clock = woken ? opts.wakeAt! : deadline;
        return woken;
      },
      activities: {
        // The activity decides the outcome and records next_attempt_at = now + retryInMs.
        attemptWebhookDelivery: async ({ retryInMs, atMs }) => {
          asked.push(retryInMs);
          stamps.push(atMs);
          const o = outcomes.shift() ?? 'fail';
          if (o === 'fail') return retryInMs === null ? { outcome: 'failed' } : { outcome: 'retry', nextAttemptAtMs: clock + retryInMs };
          if (o === 'gone') return { outcome: 'failed' };
          return { outcome: o };
        },
      },
    };
    return { result: webhookDeliveryWorkflow(ctx, { deliveryId: 'd1', run: 1, ...opts.input }), waits, asked, stamps };
  }

  it('follows the schedule 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, then fails after the eighth attempt', async () => {
    const r = run([]);
    assert.deepEqual(await r.result, { status: 'failed', attempts: 8 });
    assert.deepEqual(r.waits, [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
    assert.deepEqual(r.asked, [...WEBHOOK_RETRY_DELAYS_MS, null], 'the last attempt knows it is the last');
  });

  it('ends at the first success, at a 410 (failed at once), or when a newer run took the delivery', async () => {
    const ok = run(['fail', 'fail', 'succeeded']);
    assert.deepEqual(await ok.result, { status: 'succeeded', attempts: 3 });
    assert.deepEqual(ok.waits, [5_000, 300_000]);
    assert.deepEqual(await run(['gone']).result, { status: 'failed', attempts: 1 });
    // Woken 1 s into the 5 min wait by a manual retry: the next attempt stops at once.
    const woken = run(['fail', 'fail', 'stopped'], { wakeAt: 6_000 });
    assert.deepEqual(await woken.result, { status: 'stopped', attempts: 3 });
    assert.deepEqual(woken.waits, [5_000, 1_000]);
  });

  it('handed back after a batched first attempt: waits until its next attempt is due, then goes on from the second delay', async () => {
    const r = run(['fail', 'succeeded'], { input: { fromAttempt: 1, nextAttemptAtMs: 4_000 } });
    assert.deepEqual(await r.result, { status: 'succeeded', attempts: 3 });
    assert.deepEqual(r.waits, [4_000, 300_000]);
    assert.deepEqual(r.asked, WEBHOOK_RETRY_DELAYS_MS.slice(1, 3));
  });

  it("gives each attempt the workflow's time where the engine has one (Temporal), and none on the embedded engine", async () => {
    // The activity reckons next_attempt_at and the endpoint's 5 days from it, so both follow the
    // clock the workflow waits on (days ahead of the wall clock under a time-skipping server).
    const stamped = run([], { activityTime: true });
    await stamped.result;
    const attemptsAt = Array.from({ length: WEBHOOK_RETRY_DELAYS_MS.length + 1 }, (_, i) =>
      WEBHOOK_RETRY_DELAYS_MS.slice(0, i).reduce((a, b) => a + b, 0),
    );
    assert.deepEqual(stamped.stamps, attemptsAt);
    const plain = run(['fail', 'succeeded']);
    await plain.result;
    assert.deepEqual(plain.stamps, [undefined, undefined], 'without it the activity reads the database clock');
  });
});
