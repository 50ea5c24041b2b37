import assert from 'node:assert/strict';
import { activityOptions } from '../../workflows/temporal/binding';
import { NON_RETRYABLE_ERROR_TYPES } from '../../workflows/context';
import { DATABASE_ACTIVITY } from '../../workflows/definition';
import { sendEmail } from '../../workflows/send-email';
import { sendBatch } from '../../workflows/send-batch';
import { stepOptions } from '../../worker/dbos-engine';

describe('Temporal binding: activity options', () => {
  const deliver = sendEmail.activities.deliver;
  const deliverBatch = sendBatch.activities.deliverBatch;

  it("gives delivery the spec's retry policy on the rate-limited delivery task queue", () => {
    const o = activityOptions(deliver, { deliveryTaskQueue: 'svc-mail-delivery' });
    assert.equal(o.taskQueue, 'svc-mail-delivery');
    assert.deepEqual(o.retry, {
      maximumAttempts: 4,
      initialInterval: 30_000,
      backoffCoefficient: 2,
      nonRetryableErrorTypes: NON_RETRYABLE_ERROR_TYPES,
    });
    assert.deepEqual(NON_RETRYABLE_ERROR_TYPES, ['PermanentFailure']);
    assert.equal(activityOptions(deliver, { transportRetryBaseSeconds: 1 }).retry!.initialInterval, 1000);
  });

  it('keeps test-mode delivery and database activities on the workflow task queue', () => {
    assert.equal(activityOptions(deliver, {}).taskQueue, undefined);
    const db = activityOptions(DATABASE_ACTIVITY, { deliveryTaskQueue: 'svc-mail-delivery' });
    assert.equal(db.taskQueue, undefined);
    assert.equal(db.retry!.maximumAttempts, 10);
  });

  it('runs a delivery pass on the delivery task queue, with its database trouble retried on the database schedule', () => {
    // Where it runs and how it retries are two parts of its definition, not one class.
    assert.deepEqual(deliverBatch, { runsOn: 'delivery', retry: 'database', timeoutSeconds: 600 });
    const o = activityOptions(deliverBatch, { deliveryTaskQueue: 'svc-mail-delivery', transportRetryBaseSeconds: 30 });
    assert.equal(o.taskQueue, 'svc-mail-delivery');
    assert.deepEqual(o.retry, {
      maximumAttempts: 10,
      initialInterval: 1_000,
      backoffCoefficient: 2,
      nonRetryableErrorTypes: NON_RETRYABLE_ERROR_TYPES,
    });
    // A pass may hold SMTP transactions with large messages: the long attempt, like deliver's.
    assert.equal(o.startToCloseTimeout, '600 seconds');
    assert.equal(activityOptions(deliver, {}).startToCloseTimeout, '600 seconds');
    assert.equal(activityOptions(DATABASE_ACTIVITY, {}).startToCloseTimeout, '60 seconds');
    // Test mail (no delivery task queue in the binding) keeps the pass on the workflow's queue.
    assert.equal(activityOptions(deliverBatch, {}).taskQueue, undefined);
  });

  it('gives the same retry policies to the embedded engine, which has no task queues', () => {
    const pass = stepOptions(deliverBatch, 30);
    assert.deepEqual([pass.maxAttempts, pass.intervalSeconds, pass.backoffRate], [10, 1, 2]);
    const one = stepOptions(deliver, 30);
    assert.deepEqual([one.maxAttempts, one.intervalSeconds, one.backoffRate], [4, 30, 2]);
  });
});
