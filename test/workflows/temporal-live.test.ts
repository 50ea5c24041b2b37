import assert from 'node:assert/strict';
import pino from 'pino';
import { readConfig, temporalSettings } from '../../server/config';
import { startTemporalEngine } from '../../worker/temporal-engine';
import { sendEmail, CLOSE_UNCONFIRMED_SIGNAL } from '../../workflows/send-email';
import { startLiveStack, type LiveStack } from '../support/temporal-live';
import { waitFor } from '../support/wait';

/**
 * The send pipeline end to end on ENGINE=temporal: API (client engine) and `svc worker` code in
 * this process, a real Temporal server, a real SMTP sink. The server is the project's own
 * `temporal server start-dev` (`npm run tools` builds it), or TEMPORAL_ADDRESS's; without either
 * every test is skipped, with the reason printed in the summary. With a confirmation window
 * (CONFIRMATION_WINDOW_HOURS=1) the outbox starts one SendEmail run per message; the other
 * workflows have their own temporal-live-*.test.ts files (test/support/temporal-live.ts).
 */
describe('Temporal engine, live: the API and workers against a real Temporal server', function () {
  this.timeout(120_000);
  const log = pino({ level: process.env.TEST_LOG_LEVEL || 'silent' });
  let s: LiveStack;

  before(async function () {
    s = await startLiveStack(this, { name: 'send-email', confirmationWindowHours: 1 });
  });

  after(async () => s?.stop());

  const send = async (extra: object = {}, as: 'send' | 'test' = 'send') => {
    const res = await s.call('POST', '/api/v1/emails', {
      as,
      body: { from: `Live <live@${s.domain}>`, to: 'someone@example.com', subject: 'On Temporal', text: 'hi', ...extra },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return (res.body as { id: string }).id;
  };
  const settled = (id: string, status: string) =>
    waitFor(
      async () => {
        const got = await s.call('GET', `/api/v1/emails/${id}`);
        return (got.body as { last_event: string }).last_event === status ? got.body : undefined;
      },
      `email ${id} to be ${status}`,
      60_000,
    );

  it('delivers live mail through the rate-limited delivery queue, once', async () => {
    const to = `once-${Date.now()}@example.com`;
    const id = await send({ to });
    await settled(id, 'sent');
    assert.equal(s.sink.received.filter((m) => m.envelopeTo.includes(to)).length, 1);
    // Its own SendEmail run (workflow id = email id), still open in its confirmation window.
    const run = await s.run(id, ['RUNNING']);
    assert.equal(run.type, 'SendEmail');
    assert.equal(run.input.deliveryTaskQueue, s.temporal.deliveryTaskQueue);
    // A repeated start (dispatcher retry) joins the existing workflow and sends nothing more.
    await s.service.engine.start(sendEmail, id, { emailId: id });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(s.sink.received.filter((m) => m.envelopeTo.includes(to)).length, 1);
  });

  it('simulates test mode per the outcome table', async () => {
    await settled(await send({ to: 'bounce@example.com' }, 'test'), 'bounced');
    await settled(await send({ to: 'complaint@example.com' }, 'test'), 'complained');
  });

  it('cancels a scheduled message by signal, and it is never sent', async () => {
    const to = `cancel-${Date.now()}@example.com`;
    const id = await send({ to, scheduled_at: new Date(Date.now() + 3_600_000).toISOString() });
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal((await s.call('POST', `/api/v1/emails/${id}/cancel`)).status, 200);
    await settled(id, 'canceled');
    assert.equal(s.sink.received.filter((m) => m.envelopeTo.includes(to)).length, 0);
  });

  it('retries a 4xx with backoff and delivers once', async () => {
    const to = `retry-${Date.now()}@example.com`;
    s.sink.rules.set(to, { rcpt: 'tempfail', times: 2 });
    await settled(await send({ to }), 'sent');
    assert.equal(s.sink.received.filter((m) => m.envelopeTo.includes(to)).length, 1);
  });

  it('the relay refusing a SendEmail run: the message says why it waits; the run reset from the Temporal UI to its start, it is handed back and delivered once', async () => {
    const to = `reset-${Date.now()}@example.com`;
    s.sink.rules.set(to, { rcpt: 'tempfail', times: 2 });
    const id = await send({ to });
    const waiting = await waitFor(async () => {
      const got = (await s.call('GET', `/api/v1/emails/${id}`)).body;
      return got.waiting?.reason === 'relay_retry' ? got : undefined;
    }, 'the message to say it waits on the relay');
    assert.match(waiting.waiting.reply, /451|try later/);
    // The UI's Reset to the first workflow task: the new run finds its message `sending` and ends there.
    const { runId } = await s.client.workflow.getHandle(id).describe();
    await s.client.workflowService.resetWorkflowExecution({
      namespace: s.client.options.namespace,
      workflowExecution: { workflowId: id, runId },
      // int64 fields take a number as well as a Long (protobufjs).
      workflowTaskFinishEventId: 4 as never,
      reason: 'operator reset',
      requestId: `reset-${id}`,
    });
    await settled(id, 'sent');
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(s.sink.received.filter((m) => m.envelopeTo.includes(to)).length, 1, 'delivered once');
  });

  it('closes a sent message as unconfirmed by the operator signal', async () => {
    const id = await send({ to: `unconfirmed-${Date.now()}@example.com` });
    await settled(id, 'sent');
    // As an operator would, from outside the API process.
    const operator = await startTemporalEngine(
      temporalSettings({ ...readConfig({}), engine: 'temporal', temporal: s.temporal, retryBaseSeconds: 1 }),
      log,
    );
    try {
      await operator.signal(id, CLOSE_UNCONFIRMED_SIGNAL);
    } finally {
      await operator.stop();
    }
    await settled(id, 'unconfirmed');
  });
});
