import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { markEnqueued } from '../../db/sql/claim-outbox';
import { handBackStranded, openRunsPage } from '../../db/sql/stranded-runs';
import { recordRelayRefusals } from '../../db/sql/relay-refusals';
import { cancelEmailForOperator } from '../../db/sql/cancel-emails';
import { insertEmail, insertRecipient, insertSender, openTestDb, sql, type EmailOwner } from '../support/db-fixtures';

describe('db/sql/stranded-runs, relay-refusals and the operator cancel: what a run holds, handed back when it ended; the relay retry a message shows', function () {
  let orm: Orm;
  let owner: EmailOwner;
  const now = new Date('2030-01-01T12:00:00Z');
  const t = (s: number) => new Date(now.getTime() + s * 1000);
  const START = { at: new Date(0), id: '00000000-0000-0000-0000-000000000000' };
  const page = (q: { queuedBefore?: Date; sendingBefore?: Date; limit?: number; after?: { at: Date; id: string } } = {}) =>
    openRunsPage(orm, {
      after: q.after ?? START,
      queuedBefore: q.queuedBefore ?? now,
      sendingBefore: q.sendingBefore ?? now,
      limit: q.limit ?? 100,
    });
  const row = async (id: string) =>
    (
      await sql(
        orm,
        'select status, enqueued_at, claimed_by, started_run, deferrals, handed_back_at, relay_refusals, relay_retry_at, last_reply from emails where id = $1',
        [id],
      )
    )[0];

  before(async () => {
    orm = await openTestDb('db_stranded_runs');
    ({ owner } = await insertSender(orm));
  });
  after(async () => orm.close());
  // Each test sees only its own open messages.
  beforeEach(async () => sql(orm, `update emails set status = 'sent' where status in ('queued', 'sending')`));

  it('markEnqueued records the run the outbox gave each message; a run id left out keeps what was there', async () => {
    const a = await insertEmail(orm, owner);
    const b = await insertEmail(orm, owner, { started_run: 'earlier' });
    const c = await insertEmail(orm, owner);
    await orm.em.fork().transactional((em) => markEnqueued(em, [a.id as string, b.id as string], t(0), ['send-batch-x"1', '']));
    await orm.em.fork().transactional((em) => markEnqueued(em, [c.id as string], t(0)));
    assert.equal((await row(a.id as string)).started_run, 'send-batch-x"1');
    assert.equal((await row(a.id as string)).claimed_by, null, 'not claimed: the run has not claimed it yet');
    assert.equal((await row(b.id as string)).started_run, 'earlier');
    assert.equal((await row(c.id as string)).started_run, null);
    assert.notEqual((await row(c.id as string)).enqueued_at, null);
  });

  it('pages the messages a run holds, oldest change first, each with its run; not those waiting in their row, not started, or too recent', async () => {
    const held = await insertEmail(orm, owner, { enqueued_at: t(-600), updated_at: t(-600), started_run: 'send-batch-a' });
    const timer = await insertEmail(orm, owner, { enqueued_at: t(-500), updated_at: t(-500) });
    const sending = await insertEmail(orm, owner, {
      status: 'sending',
      enqueued_at: t(-400),
      updated_at: t(-400),
      claimed_by: 'send-batch-a',
    });
    await insertEmail(orm, owner, { enqueued_at: null, updated_at: t(-600) });
    await insertEmail(orm, owner, { enqueued_at: t(-600), updated_at: t(-600), waiting_reason: 'domain_daily_cap' });
    await insertEmail(orm, owner, { enqueued_at: t(-600), updated_at: t(-600), retry_reason: 'deferred', retry_at: t(60) });
    await insertEmail(orm, owner, { enqueued_at: t(-10), updated_at: t(-10) });
    const got = await page({ queuedBefore: t(-60), sendingBefore: t(-60) });
    assert.deepEqual(
      got.map((r) => [r.id, r.status, r.run]),
      [
        [held.id, 'queued', 'send-batch-a'],
        [timer.id, 'queued', timer.id],
        [sending.id, 'sending', 'send-batch-a'],
      ],
    );
    // A `sending` message waits longer: an attempt of an ended run may still be finishing.
    assert.deepEqual(
      (await page({ queuedBefore: t(-60), sendingBefore: t(-450) })).map((r) => r.id),
      [held.id, timer.id],
    );
    // Pages go on from where the last ended.
    const first = await page({ queuedBefore: t(-60), sendingBefore: t(-60), limit: 1 });
    const next = await page({ queuedBefore: t(-60), sendingBefore: t(-60), after: { at: new Date(first[0].updated_at), id: first[0].id } });
    assert.deepEqual(
      next.map((r) => r.id),
      [timer.id, sending.id],
    );
  });

  it('hands back only what the ended run still holds: queued again, out of the timer claim, one deferral more, recipients as they were', async () => {
    const queued = await insertEmail(orm, owner, { enqueued_at: t(-600), started_run: 'send-batch-b' });
    const sending = await insertEmail(orm, owner, {
      status: 'sending',
      enqueued_at: t(-600),
      claimed_by: 'send-batch-b',
      relay_retry_at: t(30),
    });
    const r = await insertRecipient(orm, sending.id as string, 'x@example.com', { state: 'in_flight' });
    const another = await insertEmail(orm, owner, { status: 'sending', enqueued_at: t(-600), claimed_by: 'send-batch-c' });
    const done = await insertEmail(orm, owner, { status: 'sent', enqueued_at: t(-600), claimed_by: 'send-batch-b' });
    const back = await handBackStranded(orm, { run: 'send-batch-b', ids: [queued.id, sending.id, another.id, done.id] as string[], now });
    assert.deepEqual(back.sort(), [queued.id, sending.id].sort());
    const s = await row(sending.id as string);
    assert.equal(s.status, 'queued');
    assert.equal(s.enqueued_at, null);
    assert.equal(s.claimed_by, null);
    assert.equal(s.started_run, null);
    assert.equal(s.deferrals, 1);
    assert.notEqual(s.handed_back_at, null);
    assert.equal(s.relay_retry_at, null);
    assert.equal((await sql(orm, 'select state from recipients where id = $1', [r.id]))[0].state, 'in_flight');
    assert.equal((await row(another.id as string)).status, 'sending', "another run's message is left to it");
    assert.equal((await row(done.id as string)).status, 'sent');
    // Twice is once: the second finds nothing the run holds.
    assert.deepEqual(await handBackStranded(orm, { run: 'send-batch-b', ids: [queued.id, sending.id] as string[], now }), []);
  });

  it('a message with no recorded run is held by its SendEmail run (workflow id = email id)', async () => {
    const e = await insertEmail(orm, owner, { enqueued_at: t(-600) });
    assert.deepEqual(await handBackStranded(orm, { run: 'send-batch-z', ids: [e.id as string], now }), []);
    assert.deepEqual(await handBackStranded(orm, { run: e.id as string, ids: [e.id as string], now }), [e.id]);
  });

  it('records a relay refusal on a sending message: the reply, and the next attempt on the doubling backoff until none is left', async () => {
    const e = await insertEmail(orm, owner, { status: 'sending', enqueued_at: t(-60) });
    const q = { at: now, baseSeconds: 30, maxAttempts: 4 };
    const until: (string | null)[] = [];
    for (let i = 0; i < 4; i++) {
      await recordRelayRefusals(orm, [{ id: e.id as string, reply: `451 busy ${i}` }], q);
      const r = await row(e.id as string);
      until.push(r.relay_retry_at === null ? null : new Date(r.relay_retry_at as string).toISOString());
    }
    assert.deepEqual(until, [t(30).toISOString(), t(60).toISOString(), t(120).toISOString(), null]);
    const r = await row(e.id as string);
    assert.equal(r.relay_refusals, 4);
    assert.equal(r.last_reply, '451 busy 3');
    const sent = await insertEmail(orm, owner, { status: 'sent' });
    await recordRelayRefusals(orm, [{ id: sent.id as string, reply: 'late' }], q);
    assert.equal((await row(sent.id as string)).relay_refusals, 0, 'a finished message keeps its end');
  });

  it("an operator's cancel of a message's run: canceled while queued, with its event; refused once it is sending", async () => {
    const q = await insertEmail(orm, owner, { enqueued_at: t(-60) });
    await insertRecipient(orm, q.id as string, 'a@example.com');
    assert.deepEqual(await cancelEmailForOperator(orm, { id: q.id as string, now }), { canceled: true, status: 'canceled' });
    const events = await sql(orm, 'select type from email_events where email_id = $1', [q.id]);
    assert.deepEqual(
      events.map((x) => x.type),
      ['canceled'],
    );
    const s = await insertEmail(orm, owner, { status: 'sending', enqueued_at: t(-60) });
    assert.deepEqual(await cancelEmailForOperator(orm, { id: s.id as string, now }), { canceled: false, status: 'sending' });
    assert.deepEqual(await cancelEmailForOperator(orm, { id: '00000000-0000-7000-8000-000000000000', now }), {
      canceled: false,
      status: null,
    });
  });
});
