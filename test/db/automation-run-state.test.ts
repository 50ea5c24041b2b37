import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Orm } from '../../db/orm';
import {
  cancelRuns,
  finishRun,
  mergeContactProperties,
  parkRun,
  readRunForStep,
  topicStateOf,
  writeStep,
} from '../../db/sql/automation-run-state';
import {
  concurrently,
  insertAutomation,
  insertAutomationRun,
  insertContact,
  insertSender,
  insertSubscription,
  insertTopic,
  lockWaiters,
  ms,
  openTestDb,
  openTransaction,
  sql,
  type Row,
} from '../support/db-fixtures';

describe('db/sql/automation-run-state: a run changes only while it is going; a cancel wins', function () {
  let orm: Orm;
  let org: Row;
  let key: Row;
  let automation: Row;
  let contact: Row;
  const T0 = new Date('2030-01-01T00:00:00Z');
  const at = (s: number) => new Date(T0.getTime() + s * 1000);

  before(async () => {
    orm = await openTestDb('db_automation_run_state');
    ({ organization: org, key } = await insertSender(orm));
    automation = await insertAutomation(orm, org.id, key.id, { definition: { steps: [{ type: 'delay', seconds: 60 }] } });
    contact = await insertContact(orm, org.id, { first_name: 'Ada', properties: { plan: 'free' } });
  });
  after(async () => orm.close());

  const newRun = (over: Row = {}) => insertAutomationRun(orm, automation, contact, over);
  const runRow = async (id: string) => (await sql(orm, 'select * from automation_runs where id = $1', [id]))[0];

  describe('readRunForStep', () => {
    it("answers the run with its version's definition and key, and the contact as it is now", async () => {
      const run = await newRun({ data: { x: 1 } });
      const read = await readRunForStep(orm, run.id);
      assert.ok(read);
      assert.equal(read.organization_id, org.id);
      assert.equal(read.status, 'running');
      assert.deepEqual(read.data, { x: 1 });
      assert.deepEqual(read.definition, { steps: [{ type: 'delay', seconds: 60 }] });
      assert.equal(read.api_key_id, key.id);
      assert.equal(read.contact?.id, contact.id);
      assert.equal(read.contact?.first_name, 'Ada');
      assert.deepEqual(read.contact?.properties, { plan: 'free' });
    });

    it('contact null once the contact is deleted; null for no such run', async () => {
      const gone = await insertContact(orm, org.id);
      const run = await insertAutomationRun(orm, automation, gone);
      await sql(orm, 'delete from contacts where id = $1', [gone.id]);
      const read = await readRunForStep(orm, run.id);
      assert.equal(read?.contact_id, gone.id);
      assert.equal(read?.contact, null);
      assert.equal(await readRunForStep(orm, randomUUID()), null);
    });
  });

  describe('writeStep', () => {
    it('appends a step entry once: a retry of the same path appends nothing', async () => {
      const run = await newRun();
      const w = { path: 'steps[0]', entry: { step: 'steps[0]', type: 'send', started_at: T0.toISOString() }, now: at(1) };
      assert.deepEqual(await writeStep(orm, run.id, w), { applied: true, status: 'running' });
      assert.deepEqual(await writeStep(orm, run.id, { ...w, now: at(2) }), { applied: true, status: 'running' });
      const row = await runRow(run.id);
      assert.equal(row.step, 'steps[0]');
      assert.equal(row.history.length, 1);
      assert.equal(ms(row.updated_at), at(2).getTime());
    });

    it('completes the last entry with its result; sets a status', async () => {
      const run = await newRun({ history: [{ step: 'steps[0]', type: 'send' }] });
      await writeStep(orm, run.id, { path: 'steps[0]', finish: { sent: true }, status: 'running', now: at(3) });
      const [entry] = (await runRow(run.id)).history;
      assert.deepEqual(entry.result, { sent: true });
      assert.equal(ms(entry.finished_at), at(3).getTime());
      assert.equal(entry.type, 'send');
    });

    it('a wait sets its event and deadline and clears `resumed`; its end clears them and keeps `resumed`', async () => {
      const run = await newRun({ resumed: { old: true } });
      await writeStep(orm, run.id, { path: 'steps[1]', status: 'waiting', wait: { event: 'paid', deadline: at(60) }, now: at(1) });
      let row = await runRow(run.id);
      assert.equal(row.status, 'waiting');
      assert.equal(row.waiting_event, 'paid');
      assert.equal(ms(row.wait_deadline), at(60).getTime());
      assert.equal(row.resumed, null);
      await sql(orm, `update automation_runs set resumed = '{"event":"paid"}' where id = $1`, [run.id]);
      await writeStep(orm, run.id, { path: 'steps[1]', status: 'running', wait: null, now: at(2) });
      row = await runRow(run.id);
      assert.equal(row.status, 'running');
      assert.equal(row.waiting_event, null);
      assert.equal(row.wait_deadline, null);
      assert.deepEqual(row.resumed, { event: 'paid' });
    });

    it('a run that ended is not written: applied false with its status; null for no such run', async () => {
      const run = await newRun({ status: 'canceled', step: 'steps[0]' });
      assert.deepEqual(await writeStep(orm, run.id, { path: 'steps[1]', entry: { step: 'steps[1]' }, now: at(1) }), {
        applied: false,
        status: 'canceled',
      });
      const row = await runRow(run.id);
      assert.equal(row.step, 'steps[0]');
      assert.deepEqual(row.history, []);
      assert.equal(await writeStep(orm, randomUUID(), { path: 'steps[0]', now: at(1) }), null);
    });

    it('refuses a write that both appends and completes', async () => {
      const run = await newRun();
      await assert.rejects(writeStep(orm, run.id, { path: 'steps[0]', entry: {}, finish: {}, now: at(1) }), /not both/);
    });

    it('race: concurrent retries of one step entry append it once', async () => {
      const run = await newRun();
      const results = await concurrently(6, (i) =>
        writeStep(orm, run.id, { path: 'steps[0]', entry: { step: 'steps[0]', type: 'send', n: i }, now: at(1) }),
      );
      assert.ok(results.every((r) => r?.applied));
      assert.equal((await runRow(run.id)).history.length, 1);
    });
  });

  describe('parkRun', () => {
    it('parks once per path: resume_at, next segment, started_at cleared; a retry changes nothing and answers parked', async () => {
      const run = await newRun({ segment: 0 });
      const p = { path: 'steps[2]', until: at(3600), entry: { step: 'steps[2]', type: 'delay', parked: true }, now: at(1) };
      assert.deepEqual(await parkRun(orm, run.id, p), { parked: true, status: 'running' });
      assert.deepEqual(await parkRun(orm, run.id, { ...p, now: at(2) }), { parked: true, status: 'running' });
      const row = await runRow(run.id);
      assert.equal(row.segment, 1);
      assert.equal(row.started_at, null);
      assert.equal(row.resume_path, 'steps[2]');
      assert.equal(ms(row.resume_at), at(3600).getTime());
      assert.equal(row.history.length, 1);
      assert.equal(ms(row.updated_at), at(1).getTime());
    });

    it('a canceled or waiting run is not parked; null for no such run', async () => {
      const p = { path: 'steps[2]', until: at(3600), entry: { step: 'steps[2]' }, now: at(1) };
      const canceled = await newRun({ status: 'canceled' });
      assert.deepEqual(await parkRun(orm, canceled.id, p), { parked: false, status: 'canceled' });
      const waiting = await newRun({ status: 'waiting' });
      assert.deepEqual(await parkRun(orm, waiting.id, p), { parked: false, status: 'waiting' });
      assert.equal((await runRow(waiting.id)).segment, 0);
      assert.equal(await parkRun(orm, randomUUID(), p), null);
    });

    it('race: concurrent parks at one path move the segment once and each answers parked', async () => {
      const run = await newRun();
      const results = await concurrently(6, () =>
        parkRun(orm, run.id, { path: 'steps[1]', until: at(600), entry: { step: 'steps[1]' }, now: at(1) }),
      );
      assert.ok(results.every((r) => r?.parked === true));
      const row = await runRow(run.id);
      assert.equal(row.segment, 1);
      assert.equal(row.history.length, 1);
    });
  });

  describe('finishRun and cancelRuns', () => {
    it('finishRun ends a going run; a canceled run keeps its own end', async () => {
      const run = await newRun({ status: 'waiting', waiting_event: 'paid', wait_deadline: at(60) });
      await finishRun(orm, run.id, 'completed', null, at(5));
      let row = await runRow(run.id);
      assert.equal(row.status, 'completed');
      assert.equal(row.waiting_event, null);
      assert.equal(ms(row.finished_at), at(5).getTime());
      const canceled = await newRun({ status: 'canceled', reason: 'canceled', finished_at: at(1) });
      await finishRun(orm, canceled.id, 'failed', 'boom', at(9));
      row = await runRow(canceled.id);
      assert.equal(row.status, 'canceled');
      assert.equal(row.reason, 'canceled');
      assert.equal(ms(row.finished_at), at(1).getTime());
    });

    it("cancels one run, or every going run of an automation (and no other's), each woken", async () => {
      const a = await insertAutomation(orm, org.id, key.id);
      const b = await insertAutomation(orm, org.id, key.id);
      const r1 = await insertAutomationRun(orm, a, contact);
      const r2 = await insertAutomationRun(orm, a, contact, { status: 'waiting', resume_at: at(100) });
      const done = await insertAutomationRun(orm, a, contact, { status: 'completed' });
      const other = await insertAutomationRun(orm, b, contact);
      assert.deepEqual((await cancelRuns(orm, { automationId: a.id }, at(7))).sort(), [r1.id, r2.id].sort());
      for (const id of [r1.id, r2.id]) {
        const row = await runRow(id);
        assert.equal(row.status, 'canceled');
        assert.equal(ms(row.wake_at), at(7).getTime());
        assert.equal(row.resume_at, null);
      }
      assert.equal((await runRow(done.id)).status, 'completed');
      assert.equal((await runRow(other.id)).status, 'running');
      assert.deepEqual(await cancelRuns(orm, { runId: other.id }, at(8)), [other.id]);
      assert.deepEqual(await cancelRuns(orm, { runId: other.id }, at(9)), [], 'canceled once');
    });

    it('race: of concurrent cancels of one run, exactly one cancels it', async () => {
      const run = await newRun();
      const results = await concurrently(6, (i) => cancelRuns(orm, { runId: run.id }, at(i)));
      assert.equal(results.filter((r) => r.length === 1).length, 1);
    });

    it('race: a finish and a cancel at once: exactly one of them ends the run', async () => {
      for (let i = 0; i < 10; i++) {
        const run = await newRun();
        const [, canceled] = await Promise.all([
          finishRun(orm, run.id, 'completed', null, at(1)),
          cancelRuns(orm, { runId: run.id }, at(2)),
        ]);
        const row = await runRow(run.id);
        assert.equal(row.status, canceled.length ? 'canceled' : 'completed');
        assert.equal(ms(row.finished_at), canceled.length ? at(2).getTime() : at(1).getTime());
      }
    });
  });

  describe('topicStateOf', () => {
    it("the explicit row, else the topic's default; null for a topic of another organization or none", async () => {
      const optIn = await insertTopic(orm, org.id, { default_opt_in: true });
      const optOut = await insertTopic(orm, org.id, { default_opt_in: false });
      const explicit = await insertTopic(orm, org.id, { default_opt_in: true });
      await insertSubscription(orm, contact.id, explicit.id, 'unsubscribed');
      assert.equal(await topicStateOf(orm, org.id, contact.id, optIn.slug), 'subscribed');
      assert.equal(await topicStateOf(orm, org.id, contact.id, optOut.slug), 'unsubscribed');
      assert.equal(await topicStateOf(orm, org.id, contact.id, explicit.slug), 'unsubscribed');
      const other = await insertSender(orm);
      const theirs = await insertTopic(orm, other.organization.id, { default_opt_in: true });
      assert.equal(await topicStateOf(orm, org.id, contact.id, theirs.slug), null);
      assert.equal(await topicStateOf(orm, org.id, contact.id, 'no-such-topic'), null);
    });
  });

  describe('mergeContactProperties', () => {
    it('sets and removes keys; true while the contact exists (changed or not), false once it is gone', async () => {
      const c = await insertContact(orm, org.id, { properties: { a: 1, b: 2 } });
      assert.equal(await mergeContactProperties(orm, c.id, { c: 3, a: 9 }, ['b'], at(1)), true);
      let row = (await sql(orm, 'select properties, updated_at from contacts where id = $1', [c.id]))[0];
      assert.deepEqual(row.properties, { a: 9, c: 3 });
      assert.equal(ms(row.updated_at), at(1).getTime());
      assert.equal(await mergeContactProperties(orm, c.id, { a: 9 }, [], at(2)), true);
      row = (await sql(orm, 'select updated_at from contacts where id = $1', [c.id]))[0];
      assert.equal(ms(row.updated_at), at(1).getTime(), 'no change: not written');
      assert.equal(await mergeContactProperties(orm, randomUUID(), { a: 1 }, [], at(3)), false);
    });

    it('race: a merge blocked behind another write of the contact keeps that write (no lost update)', async () => {
      const c = await insertContact(orm, org.id, { properties: {} });
      const tx = await openTransaction(orm);
      await tx.query(`update contacts set properties = properties || '{"first":1}' where id = $1`, [c.id]);
      const merge = mergeContactProperties(orm, c.id, { second: 2 }, [], at(1));
      await lockWaiters(orm, 1);
      await tx.commit();
      assert.equal(await merge, true);
      const [row] = await sql(orm, 'select properties from contacts where id = $1', [c.id]);
      assert.deepEqual(row.properties, { first: 1, second: 2 });
    });

    it('race: concurrent merges of different keys into one contact keep every key', async () => {
      const c = await insertContact(orm, org.id, { properties: {} });
      await concurrently(8, (i) => mergeContactProperties(orm, c.id, { [`k${i}`]: i }, [], at(1)));
      const [row] = await sql(orm, 'select properties from contacts where id = $1', [c.id]);
      assert.deepEqual(Object.keys(row.properties).sort(), ['k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7']);
    });
  });
});
