import assert from 'node:assert/strict';
import { startLiveStack, activitiesOf, signalsOf, timersOf, type LiveStack } from '../support/temporal-live';
import { sleep, waitFor } from '../support/wait';

/**
 * Scheduled mail on ENGINE=temporal: the outbox starts the message's SendEmail run (workflow id =
 * email id) at acceptance, and the run waits on a durable timer until scheduled_at, where an
 * operator sees it; a cancel reaches it as a signal after PostgreSQL decided it; when the timer
 * fires the run hands the message back to the outbox, which reserves its daily allowances then.
 * Both outbox modes: SendBatch delivery (no confirmation window) and one run per message (a window,
 * the run itself delivers once the outbox admits it).
 */
for (const windowHours of [0, 1]) {
  describe(`Temporal engine, live: scheduled mail on its SendEmail run's timer (confirmation window ${windowHours} h)`, function () {
    this.timeout(120_000);
    let s: LiveStack;

    before(async function () {
      s = await startLiveStack(this, { name: `scheduled-w${windowHours}`, confirmationWindowHours: windowHours, scheduleLeadSeconds: 1 });
    });
    after(async () => s?.stop());

    const send = async (extra: object) => {
      const res = await s.call('POST', '/api/v1/emails', {
        body: { from: `Later <later@${s.domain}>`, subject: 'Scheduled', text: 'at its time', ...extra },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.id as string;
    };
    const at = (ms: number) => new Date(Date.now() + ms).toISOString();
    const emailRow = async (id: string) =>
      (await s.sql(`select status, waiting_reason, enqueued_at from emails where id = ?`, [id]))[0] as {
        status: string;
        waiting_reason: string | null;
        enqueued_at: Date | null;
      };

    it('an hour ahead: its run waits on a timer until scheduled_at, and a cancel ends it by signal', async () => {
      const to = `hour-${Date.now()}@example.com`;
      const id = await send({ to, scheduled_at: at(3_600_000) });
      const waiting = await s.run(id, ['RUNNING']);
      assert.equal(waiting.type, 'SendEmail');
      assert.equal(waiting.input.handBack, true);
      // The timer an operator sees in the UI: until scheduled_at.
      await waitFor(async () => timersOf(await s.run(id, ['RUNNING'])).length === 1, 'the timer to start');
      const [timer] = timersOf(await s.run(id, ['RUNNING']));
      assert.ok(timer > 3_590_000 && timer <= 3_600_000, `a timer of about an hour (${timer} ms)`);

      assert.equal((await s.call('POST', `/api/v1/emails/${id}/cancel`)).status, 200);
      const done = await s.run(id);
      assert.deepEqual(done.result, { status: 'canceled' });
      assert.deepEqual(signalsOf(done), ['cancel']);
      assert.deepEqual(activitiesOf(done), ['loadForSend', 'handBack'], 'never claimed, never delivered');
      assert.equal((await emailRow(id)).status, 'canceled');
      await sleep(500);
      assert.equal(s.sink.received.filter((m) => m.envelopeTo.includes(to)).length, 0);
    });

    it('canceled from the Temporal UI (a workflow cancellation, not the signal): the message is canceled, with its event, and never sent', async () => {
      const to = `ui-cancel-${Date.now()}@example.com`;
      const id = await send({ to, scheduled_at: at(3_600_000) });
      await waitFor(async () => timersOf(await s.run(id, ['RUNNING'])).length === 1, 'the timer to start');
      // What the UI's "Request Cancellation" button sends.
      await s.client.workflow.getHandle(id).cancel();
      const done = await s.run(id);
      assert.deepEqual(done.result, { status: 'canceled' });
      assert.deepEqual(activitiesOf(done), ['loadForSend', 'cancelForOperator', 'handBack'], 'canceled in PostgreSQL, never claimed');
      assert.equal((await emailRow(id)).status, 'canceled');
      const email = await s.call('GET', `/api/v1/emails/${id}`);
      const types = email.body.events.map((e: { type: string }) => e.type);
      assert.equal(types.at(-1), 'canceled', types.join());
      await sleep(500);
      assert.equal(s.sink.received.filter((m) => m.envelopeTo.includes(to)).length, 0);
    });

    it('its run terminated in the Temporal UI (no workflow code runs): the message goes back to the outbox and out once at its time', async () => {
      const to = `terminated-${Date.now()}@example.com`;
      const id = await send({ to, scheduled_at: at(6_000) });
      await waitFor(async () => timersOf(await s.run(id, ['RUNNING'])).length === 1, 'the timer to start');
      await s.client.workflow.getHandle(id).terminate('operator');
      await waitFor(async () => s.sink.received.some((m) => m.envelopeTo.includes(to)), 'the mail at its time', 30_000);
      await waitFor(async () => (await emailRow(id)).status === 'sent', 'sent');
      await sleep(500);
      assert.equal(s.sink.received.filter((m) => m.envelopeTo.includes(to)).length, 1, 'once');
    });

    it('seconds ahead: the timer fires, the outbox takes it back, and it goes out once at its time', async () => {
      const to = `soon-${Date.now()}@example.com`;
      // Far enough past the 1 s lead that the outbox's once-a-second look finds it on a loaded machine.
      const when = Date.now() + 8_000;
      const id = await send({ to, scheduled_at: new Date(when).toISOString() });
      await waitFor(async () => s.sink.received.some((m) => m.envelopeTo.includes(to)), 'the message at the sink', 30_000);
      // The sink has it before the pass records it: wait for the `sent` event too.
      const email = await waitFor(async () => {
        const e = (await s.call('GET', `/api/v1/emails/${id}`)).body;
        return e.events.some((x: { type: string }) => x.type === 'sent') ? e : undefined;
      }, 'the sent event');
      const sentAt = Date.parse(email.events.find((e: { type: string }) => e.type === 'sent').at);
      assert.ok(sentAt >= when - 1000, `sent at its time (${sentAt - when} ms after scheduled_at)`);

      const run = await s.run(id, windowHours > 0 ? ['RUNNING'] : ['COMPLETED']);
      if (windowHours > 0) {
        // The run delivered it itself once the outbox admitted it, and now waits in its window.
        await waitFor(async () => activitiesOf(await s.run(id, ['RUNNING'])).includes('deliver'), 'deliver in the run');
        const r = await s.run(id, ['RUNNING']);
        assert.deepEqual(activitiesOf(r), ['loadForSend', 'handBack', 'claimForDelivery', 'deliver']);
        assert.deepEqual(signalsOf(r), ['admitted']);
      } else {
        // Handed back, then delivered by a SendBatch run as any due message.
        assert.deepEqual(activitiesOf(run), ['loadForSend', 'handBack']);
        assert.deepEqual(run.result, { status: 'queued' });
        const batches = await s.list(`WorkflowType = 'SendBatch'`);
        assert.ok(batches.length >= 1, 'a SendBatch run delivered it');
      }
      await sleep(1000);
      assert.equal(s.sink.received.filter((m) => m.envelopeTo.includes(to)).length, 1, 'exactly once');
    });

    it('the daily cap is decided when it is due: allowance taken meanwhile holds it back', async () => {
      const to = `capped-${Date.now()}@example.com`;
      // An allowance of one for the day, unused when the message is scheduled...
      await s.sql(`update organizations set daily_send_cap = 1 where id = ?`, [s.orgId]);
      await s.sql(`delete from send_counters where scope_id = ?`, [s.orgId]);
      try {
        const id = await send({ to, scheduled_at: at(8_000) });
        // ...and taken by a message sent now, before the scheduled one is due.
        const first = `first-${Date.now()}@example.com`;
        await send({ to: first });
        await waitFor(async () => s.sink.received.some((m) => m.envelopeTo.includes(first)), 'the unscheduled message sent');
        await waitFor(
          async () => (await emailRow(id)).waiting_reason === 'organization_daily_cap',
          'the due message parked by the cap',
          30_000,
        );
        const row = await emailRow(id);
        assert.equal(row.status, 'queued');
        assert.equal(s.sink.received.filter((m) => m.envelopeTo.includes(to)).length, 0, 'held back, not sent');
        const run = await s.run(id, windowHours > 0 ? ['RUNNING'] : ['COMPLETED']);
        assert.ok(!activitiesOf(run).includes('deliver'), 'the run did not deliver past the cap');
      } finally {
        await s.sql(`update organizations set daily_send_cap = null where id = ?`, [s.orgId]);
      }
    });
  });
}
