import assert from 'node:assert/strict';
import { activitiesOf, activityInputs, startLiveStack, timersOf, type LiveStack } from '../support/temporal-live';
import { waitFor } from '../support/wait';

/**
 * SendBatch on a real Temporal server: with CONFIRMATION_WINDOW_HOURS=0 the outbox starts batch
 * runs, not a SendEmail per message (worker/outbox.ts). One batch holds a message the relay takes,
 * one it refuses for now (451 twice) and one it refuses for good (550): the run retries only the
 * second, after the transport backoff (RETRY_BASE_SECONDS=1: 1 s, then 2 s); the third is a hard
 * bounce, never retried. A message refused for now on every attempt ends `failed` after the fourth.
 */
describe('Temporal engine, live: SendBatch', function () {
  this.timeout(120_000);
  let s: LiveStack;

  before(async function () {
    s = await startLiveStack(this, { name: 'batch' });
  });
  after(async () => s?.stop());

  const email = async (id: string) => (await s.call('GET', `/api/v1/emails/${id}`)).body;
  const settled = (id: string, status: string) =>
    waitFor(
      async () => {
        const got = await email(id);
        return got.last_event === status ? got : undefined;
      },
      `email ${id} to be ${status}`,
      30_000,
    );
  const mailTo = (address: string) => s.sink.received.filter((m) => m.envelopeTo.includes(address));

  it('one SendBatch run: a 4xx is retried with backoff and delivered once, a 5xx is a hard bounce never retried, the rest goes at once', async () => {
    const tag = Date.now();
    const [ok, busy, gone] = ['ok', 'busy', 'gone'].map((n) => `${n}-${tag}@example.com`);
    s.sink.rules.set(busy, { rcpt: 'tempfail', times: 2 });
    s.sink.rules.set(gone, { rcpt: 'reject', code: 550, message: '5.1.1 no such mailbox' });
    const res = await s.call('POST', '/api/v1/emails/batch', {
      body: [ok, busy, gone].map((to) => ({ from: `Batch <batch@${s.domain}>`, to, subject: `Batch to ${to}`, text: 'hi' })),
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const [okId, busyId, goneId] = res.body.data.map((d: { id: string }) => d.id);

    await settled(okId, 'sent');
    // A 5xx is final at once (docs/api.md): a hard bounce, and the address is suppressed.
    const bounced = await settled(goneId, 'bounced');
    const bounce = bounced.events.find((e: { type: string }) => e.type === 'bounced');
    assert.equal(bounce?.bounce_type, 'hard');
    assert.match(bounce?.detail ?? '', /^550 5\.1\.1 no such mailbox/);
    const sent = await settled(busyId, 'sent');
    assert.deepEqual(
      sent.events.map((e: { type: string }) => e.type),
      ['queued', 'sent'],
    );
    assert.equal(mailTo(ok).length, 1);
    assert.equal(mailTo(busy).length, 1, 'delivered once, after two refusals');
    assert.equal(mailTo(gone).length, 0);
    const suppressed = await s.call('GET', `/api/v1/suppressions?email=${encodeURIComponent(gone)}`, { as: 'admin' });
    assert.deepEqual(
      suppressed.body.data.map((x: { reason: string }) => x.reason),
      ['bounce'],
    );

    // The three were one run, and that run is a SendBatch on this stack's task queue.
    const owners = await s.sql<{ claimed_by: string }>('select distinct claimed_by from emails where id = any(?::uuid[])', [
      `{${okId},${busyId},${goneId}}`,
    ]);
    assert.equal(owners.length, 1, JSON.stringify(owners));
    const batchId = owners[0].claimed_by;
    const run = await s.run(batchId);
    assert.equal(run.type, 'SendBatch');
    assert.equal(run.taskQueue, s.temporal.taskQueue);
    assert.deepEqual(run.input.emailIds, [okId, busyId, goneId]);
    assert.deepEqual(run.result, { claimed: 3, failed: 0 });
    // Pass 1 takes all three; passes 2 and 3 carry the 451 alone, each after the backoff (1 s,
    // then 2 s), and the third delivers it. The 550 is never tried again.
    assert.deepEqual(activitiesOf(run), ['claimBatch', 'deliverBatch', 'deliverBatch', 'deliverBatch']);
    assert.deepEqual(
      activityInputs(run, 'deliverBatch').map(([ids]) => ids),
      [[okId, busyId, goneId], [busyId], [busyId]],
    );
    assert.deepEqual(timersOf(run), [1000, 2000]);

    // Nothing ran as SendEmail: with no confirmation window every message goes by batch.
    await waitFor(async () => (await s.list(`WorkflowType = 'SendBatch'`)).includes(batchId), 'the run in the visibility store');
    assert.deepEqual(await s.list(`WorkflowType = 'SendEmail'`), []);
  });

  it('a 4xx on every attempt: four passes with backoff (1 s, 2 s, 4 s), then failed for good with the reason', async () => {
    const to = `always-busy-${Date.now()}@example.com`;
    s.sink.rules.set(to, { rcpt: 'tempfail', times: 100 });
    const res = await s.call('POST', '/api/v1/emails', { body: { from: `batch@${s.domain}`, to, subject: 'Never taken', text: 'hi' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const id = res.body.id as string;
    const failed = await settled(id, 'failed');
    const failure = failed.events.find((e: { type: string }) => e.type === 'failed');
    assert.match(failure?.detail ?? '', /451|try later/, JSON.stringify(failed.events));
    assert.equal(mailTo(to).length, 0);
    const [{ claimed_by: batchId }] = await s.sql<{ claimed_by: string }>('select claimed_by from emails where id = ?', [id]);
    const run = await s.run(batchId);
    assert.equal(run.type, 'SendBatch');
    assert.deepEqual(activitiesOf(run), ['claimBatch', 'deliverBatch', 'deliverBatch', 'deliverBatch', 'deliverBatch', 'failBatch']);
    assert.deepEqual(timersOf(run), [1000, 2000, 4000]);
    assert.deepEqual(run.result, { claimed: 1, failed: 1 });
    // What a later attempt can no longer change: the message stays failed.
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await email(id)).last_event, 'failed');
  });

  it('the relay refusing for now: the message says it waits for a retry and why; its run terminated meanwhile, it is handed back and delivered once', async () => {
    const to = `relay-down-${Date.now()}@example.com`;
    s.sink.rules.set(to, { rcpt: 'tempfail', times: 2 });
    const res = await s.call('POST', '/api/v1/emails', { body: { from: `batch@${s.domain}`, to, subject: 'Relay down', text: 'hi' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const id = res.body.id as string;
    const waiting = await waitFor(async () => {
      const got = await email(id);
      return got.waiting?.reason === 'relay_retry' ? got : undefined;
    }, 'the message to say it waits on the relay');
    assert.equal((await s.sql<{ status: string }>('select status from emails where id = ?', [id]))[0].status, 'sending');
    assert.match(waiting.waiting.reply, /451|try later/);
    assert.ok(Date.parse(waiting.waiting.until) > Date.parse(waiting.created_at), 'a time for the next attempt');
    // An operator terminates the batch run in the Temporal UI while it waits out the backoff.
    const [{ claimed_by: batchId }] = await s.sql<{ claimed_by: string }>('select claimed_by from emails where id = ?', [id]);
    await s.client.workflow.getHandle(batchId).terminate('operator');
    const sent = await settled(id, 'sent');
    assert.equal(sent.waiting, null);
    assert.equal(mailTo(to).length, 1, 'delivered once, by the run the outbox started after the hand-back');
    const [row] = await s.sql<{ claimed_by: string; deferrals: number; relay_refusals: number }>(
      'select claimed_by, deferrals, relay_refusals from emails where id = ?',
      [id],
    );
    assert.notEqual(row.claimed_by, batchId);
    assert.equal(row.deferrals, 1);
    assert.ok(row.relay_refusals >= 1);
  });
});
