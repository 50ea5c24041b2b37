import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Orm } from '../../db/orm';
import {
  clearWake,
  consumeTriggers,
  markRunsStarted,
  purgeConsumedTriggers,
  unstartedRuns,
  wokenRuns,
} from '../../db/sql/automation-outbox';
import {
  concurrently,
  insertAutomation,
  insertAutomationRun,
  insertAutomationTrigger,
  insertContact,
  insertSender,
  insertTopic,
  ms,
  openTestDb,
  sql,
  type Row,
} from '../support/db-fixtures';

describe('db/sql/automation-outbox: trigger rows become runs once; runs to start and to wake', function () {
  let orm: Orm;
  let org: Row;
  let key: Row;

  before(async () => {
    orm = await openTestDb('db_automation_outbox');
  });
  after(async () => orm.close());
  // Each test has an organization of its own, and starts with no pending trigger and no run
  // waiting to start or wake (these statements serve every organization).
  beforeEach(async () => {
    ({ organization: org, key } = await insertSender(orm));
    await sql(orm, 'update automation_triggers set consumed_at = now() where consumed_at is null');
    await sql(orm, "update automation_runs set status = 'completed', wake_at = null");
  });

  const runsOf = (automationId: string) =>
    sql(orm, 'select * from automation_runs where automation_id = $1 order by created_at, id', [automationId]);
  const consumed = async (triggerId: string) =>
    (await sql(orm, 'select consumed_at from automation_triggers where id = $1', [triggerId]))[0].consumed_at !== null;

  describe('consumeTriggers', () => {
    it('contact.created: one run per enabled automation of the organization, the trigger marked consumed', async () => {
      const a = await insertAutomation(orm, org.id, key.id, { trigger_type: 'contact.created' });
      const b = await insertAutomation(orm, org.id, key.id, { trigger_type: 'contact.created' });
      const contact = await insertContact(orm, org.id);
      const t = await insertAutomationTrigger(orm, org.id, contact.id);
      const now = new Date();
      assert.deepEqual(await consumeTriggers(orm, 10, now), { consumed: 1, started: 2 });
      assert.equal(await consumed(t.id), true);
      for (const automation of [a, b]) {
        const [run] = await runsOf(automation.id);
        assert.equal(run.contact_id, contact.id);
        assert.equal(run.email, contact.email);
        assert.equal(run.dedupe_key, 'contact.created');
        assert.equal(run.status, 'running');
        assert.equal(run.started_at, null, 'the dispatcher starts it');
        assert.equal(run.trigger.type, 'contact.created');
        assert.equal(ms(run.created_at), now.getTime());
      }
    });

    it('no run for a disabled, deleted, younger (enabled after the trigger) or other-trigger automation, nor for a deleted contact; the row is consumed all the same', async () => {
      const disabled = await insertAutomation(orm, org.id, key.id, { trigger_type: 'contact.created', enabled: false });
      const deleted = await insertAutomation(orm, org.id, key.id, { trigger_type: 'contact.created', deleted_at: new Date() });
      const younger = await insertAutomation(orm, org.id, key.id, {
        trigger_type: 'contact.created',
        enabled_since: new Date(Date.now() + 60_000),
      });
      const eventTriggered = await insertAutomation(orm, org.id, key.id);
      const contact = await insertContact(orm, org.id);
      const t1 = await insertAutomationTrigger(orm, org.id, contact.id);
      const t2 = await insertAutomationTrigger(orm, org.id, randomUUID());
      assert.deepEqual(await consumeTriggers(orm, 10, new Date()), { consumed: 2, started: 0 });
      assert.equal(await consumed(t1.id), true);
      assert.equal(await consumed(t2.id), true);
      for (const a of [disabled, deleted, younger, eventTriggered]) assert.deepEqual(await runsOf(a.id), []);
    });

    it("an organization's triggers start only its own automations", async () => {
      const mine = await insertAutomation(orm, org.id, key.id, { trigger_type: 'contact.created' });
      const other = await insertSender(orm);
      const theirs = await insertAutomation(orm, other.organization.id, other.key.id, { trigger_type: 'contact.created' });
      const contact = await insertContact(orm, other.organization.id);
      await insertAutomationTrigger(orm, other.organization.id, contact.id);
      assert.deepEqual(await consumeTriggers(orm, 10, new Date()), { consumed: 1, started: 1 });
      assert.deepEqual(await runsOf(mine.id), []);
      assert.equal((await runsOf(theirs.id)).length, 1);
    });

    it('contact.created starts once per contact ever: a second trigger row of the contact adds no run', async () => {
      const a = await insertAutomation(orm, org.id, key.id, { trigger_type: 'contact.created' });
      const contact = await insertContact(orm, org.id);
      await insertAutomationTrigger(orm, org.id, contact.id);
      await insertAutomationTrigger(orm, org.id, contact.id);
      assert.deepEqual(await consumeTriggers(orm, 10, new Date()), { consumed: 2, started: 1 });
      assert.equal((await runsOf(a.id)).length, 1);
    });

    it('topic.subscribed: the automation of that topic only, once per subscription (a subscribe after leaving starts again)', async () => {
      const news = await insertTopic(orm, org.id, { slug: 'news-outbox' });
      const other = await insertTopic(orm, org.id);
      const a = await insertAutomation(orm, org.id, key.id, { trigger_type: 'topic.subscribed', trigger_topic_id: news.id });
      const b = await insertAutomation(orm, org.id, key.id, { trigger_type: 'topic.subscribed', trigger_topic_id: other.id });
      const contact = await insertContact(orm, org.id);
      const t1 = await insertAutomationTrigger(orm, org.id, contact.id, { type: 'topic.subscribed', topic_id: news.id });
      const t2 = await insertAutomationTrigger(orm, org.id, contact.id, { type: 'topic.subscribed', topic_id: news.id });
      assert.deepEqual(await consumeTriggers(orm, 10, new Date()), { consumed: 2, started: 2 });
      const runs = await runsOf(a.id);
      assert.deepEqual(runs.map((r) => r.dedupe_key).sort(), [`trigger:${t1.id}`, `trigger:${t2.id}`].sort());
      assert.equal(runs[0].trigger.topic, 'news-outbox');
      assert.equal(runs[0].trigger.type, 'topic.subscribed');
      assert.deepEqual(await runsOf(b.id), []);
    });

    it('takes at most `limit` rows, oldest first; the rest wait for the next call', async () => {
      const contacts = await concurrently(3, () => insertContact(orm, org.id));
      const triggers: Row[] = [];
      for (const c of contacts) triggers.push(await insertAutomationTrigger(orm, org.id, c.id));
      assert.equal((await consumeTriggers(orm, 2, new Date())).consumed, 2);
      assert.deepEqual(await Promise.all(triggers.map((t) => consumed(t.id))), [true, true, false]);
      assert.equal((await consumeTriggers(orm, 2, new Date())).consumed, 1);
      assert.equal((await consumeTriggers(orm, 2, new Date())).consumed, 0);
    });

    it('an automation whose first step is a long delay gets its run written parked until the delay ends', async () => {
      const a = await insertAutomation(orm, org.id, key.id, { trigger_type: 'contact.created', park_first_seconds: 3600 });
      const contact = await insertContact(orm, org.id);
      await insertAutomationTrigger(orm, org.id, contact.id);
      const now = new Date('2030-01-01T00:00:00Z');
      await consumeTriggers(orm, 10, now);
      const [run] = await runsOf(a.id);
      assert.equal(ms(run.resume_at), now.getTime() + 3_600_000);
      assert.equal(run.segment, 1);
      assert.equal(run.step, 'steps[0]');
    });

    it('race: concurrent consumers take each row once and start each run once', async () => {
      const a = await insertAutomation(orm, org.id, key.id, { trigger_type: 'contact.created' });
      const contacts = await concurrently(30, () => insertContact(orm, org.id));
      for (const c of contacts) await insertAutomationTrigger(orm, org.id, c.id);
      const results = await concurrently(6, () => consumeTriggers(orm, 7, new Date()));
      let total = results.reduce((n, r) => n + r.consumed, 0);
      let started = results.reduce((n, r) => n + r.started, 0);
      // Whatever the first round left (each took at most 7), a last call takes.
      const rest = await consumeTriggers(orm, 100, new Date());
      total += rest.consumed;
      started += rest.started;
      assert.equal(total, 30);
      assert.equal(started, 30);
      const runs = await runsOf(a.id);
      assert.equal(runs.length, 30);
      assert.equal(new Set(runs.map((r) => r.contact_id)).size, 30);
    });
  });

  describe('purgeConsumedTriggers', () => {
    it('removes rows consumed before the cut only; pending rows stay', async () => {
      const contact = await insertContact(orm, org.id);
      const old = await insertAutomationTrigger(orm, org.id, contact.id, { consumed_at: new Date('2020-01-01T00:00:00Z') });
      const recent = await insertAutomationTrigger(orm, org.id, contact.id, { consumed_at: new Date('2020-03-01T00:00:00Z') });
      const pending = await insertAutomationTrigger(orm, org.id, contact.id);
      assert.equal(await purgeConsumedTriggers(orm, new Date('2020-02-01T00:00:00Z')), 1);
      const left = (
        await sql(orm, 'select id from automation_triggers where id = any($1::bigint[])', [[old.id, recent.id, pending.id]])
      ).map((r) => r.id);
      assert.deepEqual(left.sort(), [recent.id, pending.id].sort());
    });
  });

  describe('unstartedRuns and markRunsStarted', () => {
    it('lists runs never started or parked and due, oldest due first; not started ones, ended ones or parked for later', async () => {
      const a = await insertAutomation(orm, org.id, key.id);
      const contact = await insertContact(orm, org.id);
      const now = new Date('2030-06-01T12:00:00Z');
      const t = (s: number) => new Date(now.getTime() + s * 1000);
      const fresh = await insertAutomationRun(orm, a, contact, { started_at: null, created_at: t(-10) });
      const due = await insertAutomationRun(orm, a, contact, { started_at: null, created_at: t(-100), resume_at: t(-5), segment: 1 });
      const waiting = await insertAutomationRun(orm, a, contact, { started_at: null, status: 'waiting', created_at: t(-20) });
      await insertAutomationRun(orm, a, contact, { started_at: t(-1), created_at: t(-30) });
      await insertAutomationRun(orm, a, contact, { started_at: null, status: 'canceled', created_at: t(-30) });
      await insertAutomationRun(orm, a, contact, { started_at: null, created_at: t(-100), resume_at: t(60), segment: 1 });
      await insertAutomationRun(orm, a, contact, { started_at: null, created_at: t(1) });
      const runs = await unstartedRuns(orm, 10, now);
      assert.deepEqual(
        runs.map((r) => r.id),
        [waiting.id, fresh.id, due.id],
      );
      assert.deepEqual(
        runs.map((r) => r.segment),
        [0, 0, 1],
      );
      assert.equal(runs[0].organization_id, org.id);
      assert.deepEqual(
        (await unstartedRuns(orm, 1, now)).map((r) => r.id),
        [waiting.id],
      );
    });

    it('marks a start done for the segment it started only: a run parked again meanwhile stays to start', async () => {
      const a = await insertAutomation(orm, org.id, key.id);
      const contact = await insertContact(orm, org.id);
      const now = new Date();
      const r1 = await insertAutomationRun(orm, a, contact, { started_at: null, created_at: new Date(now.getTime() - 1000) });
      const r2 = await insertAutomationRun(orm, a, contact, { started_at: null, created_at: new Date(now.getTime() - 1000), segment: 2 });
      await markRunsStarted(
        orm,
        [
          { id: r1.id, segment: 0 },
          { id: r2.id, segment: 1 },
        ],
        now,
      );
      assert.deepEqual(
        (await unstartedRuns(orm, 10, now)).map((r) => r.id),
        [r2.id],
      );
      const [row] = await sql(orm, 'select started_at from automation_runs where id = $1', [r1.id]);
      assert.equal(ms(row.started_at), now.getTime());
      // Marked again (a repeated pass): the first mark stays.
      await markRunsStarted(orm, [{ id: r1.id, segment: 0 }], new Date(now.getTime() + 5000));
      const [again] = await sql(orm, 'select started_at from automation_runs where id = $1', [r1.id]);
      assert.equal(ms(again.started_at), now.getTime());
    });
  });

  describe('wokenRuns and clearWake', () => {
    it('lists runs to wake by wake_at; a clear with an older mark leaves a newer wake in place', async () => {
      const a = await insertAutomation(orm, org.id, key.id);
      const contact = await insertContact(orm, org.id);
      const w1 = new Date('2030-01-01T00:00:01Z');
      const w2 = new Date('2030-01-01T00:00:02Z');
      const later = await insertAutomationRun(orm, a, contact, { wake_at: w2, started_at: null });
      const first = await insertAutomationRun(orm, a, contact, { wake_at: w1, segment: 3 });
      const woken = await wokenRuns(orm, 10);
      assert.deepEqual(
        woken.map((r) => [r.id, r.started, r.segment]),
        [
          [first.id, true, 3],
          [later.id, false, 0],
        ],
      );
      assert.equal(ms(woken[0].wake_at), w1.getTime());
      // A newer wake arrived after the read: clearing with the old mark keeps it.
      await sql(orm, 'update automation_runs set wake_at = $1 where id = $2', [new Date('2030-01-01T00:00:03Z'), first.id]);
      await clearWake(orm, first.id, woken[0].wake_at);
      await clearWake(orm, later.id, woken[1].wake_at);
      assert.deepEqual(
        (await wokenRuns(orm, 10)).map((r) => r.id),
        [first.id],
      );
    });
  });
});
