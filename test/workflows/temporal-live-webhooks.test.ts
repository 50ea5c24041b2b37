import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import { activitiesOf, signalsOf, startLiveStack, timersOf, type LiveStack } from '../support/temporal-live';
import { WebhookReceiver } from '../support/webhook-receiver';
import { waitFor } from '../support/wait';

/**
 * WebhookFirstAttempts and WebhookDelivery on a real Temporal server. The receiver refuses twice
 * and then answers 200: the first attempt (a WebhookFirstAttempts batch) hands the delivery back,
 * a WebhookDelivery run makes the second after the schedule's 5 s, and the third is the
 * operator's manual retry, because the schedule's next step is 5 minutes: the retry starts the
 * delivery's next run and wakes the waiting one with the `wake` signal, so that one stops.
 */
describe('Temporal engine, live: WebhookFirstAttempts and WebhookDelivery', function () {
  this.timeout(120_000);
  let s: LiveStack;
  let receiver: WebhookReceiver;

  before(async function () {
    s = await startLiveStack(this, { name: 'webhooks' });
    receiver = new WebhookReceiver();
    await receiver.start();
  });
  after(async () => {
    await s?.stop();
    await receiver?.stop();
  });

  const deliveries = async (hookId: string) =>
    (await s.call('GET', `/api/v1/webhooks/${hookId}/deliveries`, { as: 'admin' })).body.data as any[];
  /** The WebhookFirstAttempts runs of this stack whose batch held `deliveryId`, by workflow id. */
  const firstAttemptRuns = async (deliveryId: string) => {
    const ids = await s.list(`WorkflowType = 'WebhookFirstAttempts'`);
    const runs = await Promise.all(ids.map(async (id) => ({ id, run: await s.run(id, ['COMPLETED', 'RUNNING']) })));
    return runs.filter((r) => r.run.input.deliveries.some((d: { deliveryId: string }) => d.deliveryId === deliveryId));
  };

  it('a receiver that fails twice then answers 200: the delivery ends succeeded, every attempt recorded, the same signed body each time', async () => {
    const path = '/hook-flaky';
    const created = await s.call('POST', '/api/v1/webhooks', {
      as: 'admin',
      body: { url: `${receiver.url}${path}`, events: ['email.sent'] },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const hook = created.body as { id: string; secret: string };
    const answers = [500, 503];
    receiver.respond = (r) => (r.path === path ? (answers.shift() ?? 200) : 200);

    const sent = await s.call('POST', '/api/v1/emails', {
      as: 'test',
      body: { from: `App <app@${s.domain}>`, to: `hooked-${Date.now()}@example.com`, subject: 'Hook me', text: 'hi' },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));

    // Attempt 1 (the batch) got the 500 and handed the delivery back for the schedule's 5 s.
    const first = await waitFor(
      async () => (await deliveries(hook.id)).find((d) => d.attempts === 1 && d.status === 'pending'),
      'attempt 1',
    );
    assert.equal(first.last_status_code, 500);
    // Attempt 2 (a WebhookDelivery run, after the wait) got the 503; the next is due in 5 minutes.
    const second = await waitFor(
      async () => (await deliveries(hook.id)).find((d) => d.id === first.id && d.attempts === 2),
      'attempt 2',
      20_000,
    );
    assert.equal(second.status, 'pending');
    assert.equal(second.last_status_code, 503);
    assert.equal(second.last_response, 'refused with 503');
    const wait = Date.parse(second.next_attempt_at) - Date.now();
    assert.ok(wait > 4 * 60_000 && wait <= 5 * 60_000, `next attempt in ${wait} ms`);
    const got = receiver.at(path);
    assert.equal(got.length, 2);
    assert.ok(got[1].at - got[0].at >= 4_500, `attempt 2 came ${got[1].at - got[0].at} ms after attempt 1: the 5 s step of the schedule`);

    // The operator's retry: the third attempt answers 200.
    const retried = await s.call('POST', `/api/v1/webhooks/${hook.id}/deliveries/${first.id}/retry`, { as: 'admin' });
    assert.equal(retried.status, 202, JSON.stringify(retried.body));
    const done = await waitFor(async () => {
      const d = (await deliveries(hook.id)).find((x) => x.id === first.id);
      return d?.status === 'succeeded' ? d : undefined;
    }, 'the delivery to succeed');
    assert.equal(done.attempts, 3);
    assert.equal(done.last_status_code, 200);
    assert.equal(done.next_attempt_at, null);
    const all = receiver.at(path);
    assert.equal(all.length, 3, 'three POSTs, no more');
    const wh = new Webhook(hook.secret);
    for (const r of all) {
      assert.equal(r.headers['webhook-id'], first.id, 'webhook-id is the delivery id on every attempt');
      assert.equal(r.body, all[0].body, 'the same bytes on every attempt');
      wh.verify(r.body, r.headers);
    }

    // On the server: run 1 went WebhookFirstAttempts → WebhookDelivery (one timer, the attempt,
    // then the wait the `wake` signal ended: its next attempt found run 2 and stopped); run 2 is
    // a new WebhookFirstAttempts batch.
    const run1 = await s.run(`webhook-delivery:${first.id}:1`);
    assert.equal(run1.type, 'WebhookDelivery');
    assert.equal(run1.taskQueue, s.temporal.taskQueue);
    assert.equal(run1.input.fromAttempt, 1);
    assert.deepEqual(run1.result, { status: 'stopped', attempts: 3 });
    assert.deepEqual(activitiesOf(run1), ['attemptWebhookDelivery', 'attemptWebhookDelivery']);
    assert.deepEqual(signalsOf(run1), ['wake']);
    assert.equal(timersOf(run1).length, 2, 'the wait for attempt 2, then the 5 minutes the signal cut short');
    assert.ok(timersOf(run1)[1] > 4 * 60_000, `${timersOf(run1)[1]} ms`);
    const batches = await waitFor(async () => {
      const runs = await firstAttemptRuns(first.id);
      return runs.length === 2 && runs.every((r) => r.run.status === 'COMPLETED') ? runs : undefined;
    }, 'both WebhookFirstAttempts runs in the visibility store');
    const results = batches.map((b) => b.run.result).sort((a, b) => a.handedBack - b.handedBack);
    assert.deepEqual(results, [
      { succeeded: 1, failed: 0, handedBack: 0, skipped: 0 },
      { succeeded: 0, failed: 0, handedBack: 1, skipped: 0 },
    ]);
    for (const b of batches) assert.deepEqual(activitiesOf(b.run), ['attemptWebhookBatch']);
  });
});
