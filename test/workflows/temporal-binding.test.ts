import assert from 'node:assert/strict';
import { activityOptions } from '../../workflows/temporal/binding';
import { NON_RETRYABLE_ERROR_TYPES } from '../../workflows/context';

describe('Temporal binding: activity options', () => {
  it("gives delivery the spec's retry policy on the rate-limited delivery task queue", () => {
    const o = activityOptions('transport', { deliveryTaskQueue: 'svc-mail-delivery' });
    assert.equal(o.taskQueue, 'svc-mail-delivery');
    assert.deepEqual(o.retry, {
      maximumAttempts: 4,
      initialInterval: 30_000,
      backoffCoefficient: 2,
      nonRetryableErrorTypes: NON_RETRYABLE_ERROR_TYPES,
    });
    assert.deepEqual(NON_RETRYABLE_ERROR_TYPES, ['PermanentFailure']);
    assert.equal(activityOptions('transport', { transportRetryBaseSeconds: 1 }).retry!.initialInterval, 1000);
  });

  it('keeps test-mode delivery and database activities on the workflow task queue', () => {
    assert.equal(activityOptions('transport', {}).taskQueue, undefined);
    const db = activityOptions('infrastructure', { deliveryTaskQueue: 'svc-mail-delivery' });
    assert.equal(db.taskQueue, undefined);
    assert.equal(db.retry!.maximumAttempts, 10);
  });
});
