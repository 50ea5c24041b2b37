import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import { claimScheduled, handBackScheduled } from '../../db/sql/scheduled-timers';
import { insertEmail, insertSender, ms, openTestDb, sql, type EmailOwner } from '../support/db-fixtures';
import { inTransaction } from '../support/db-fixtures-rz';

describe('db/sql/scheduled-timers: scheduled mail claimed for an engine timer, and handed back when it fires', function () {
  let orm: Orm;
  let owner: EmailOwner;
  const horizon = new Date('2032-01-01T00:00:00.000Z');
  const later = (minutes: number) => new Date(horizon.getTime() + minutes * 60_000);

  before(async () => {
    orm = await openTestDb('db_scheduled_timers');
    owner = (await insertSender(orm)).owner;
  });
  after(async () => orm.close());
  // Each test starts with an empty outbox: the claim is not scoped (it serves every organization).
  beforeEach(async () => {
    await sql(orm, 'update emails set enqueued_at = now() where enqueued_at is null');
  });

  const claim = (q: Partial<Parameters<typeof claimScheduled>[1]> = {}) =>
    inTransaction(orm, (em) => claimScheduled(em, { mode: 'live', stream: 'transactional', after: horizon, limit: 10, ...q }));
  const scheduled = (minutes: number, over: Record<string, unknown> = {}) =>
    insertEmail(orm, owner, { scheduled_at: later(minutes), ...over });

  describe('claimScheduled', () => {
    it('claims the mail scheduled after the horizon, soonest first, up to the limit', async () => {
      const c = await scheduled(30);
      const a = await scheduled(10);
      const b = await scheduled(20);
      await scheduled(-5); // due before the horizon: the due claim's, not this one's
      await insertEmail(orm, owner); // not scheduled: created now, long before the horizon
      assert.deepEqual(
        (await claim({ limit: 2 })).map((r) => r.id),
        [a.id, b.id],
      );
      const all = await claim();
      assert.deepEqual(
        all.map((r) => r.id),
        [a.id, b.id, c.id],
      );
      assert.deepEqual(all[0], { id: a.id, organization_id: owner.organizationId, kind: null, subject: 'Subject' });
    });

    it('only of the mode and stream asked, still in the outbox, not parked, never handed back', async () => {
      const ok = await scheduled(10, { kind: 'broadcast' });
      await scheduled(11, { mode: 'test' });
      await scheduled(12, { stream: 'bulk' });
      await scheduled(13, { enqueued_at: new Date() });
      await scheduled(14, { waiting_reason: 'domain_daily_cap', waiting_until: later(60) });
      await scheduled(15, { handed_back_at: new Date() });
      assert.deepEqual(await claim(), [{ id: ok.id, organization_id: owner.organizationId, kind: 'broadcast', subject: 'Subject' }]);
      const test = await claim({ mode: 'test' });
      assert.equal(test.length, 1);
    });

    it('a limit of zero or less claims nothing', async () => {
      await scheduled(10);
      assert.deepEqual(await claim({ limit: 0 }), []);
      assert.deepEqual(await claim({ limit: -1 }), []);
    });

    /**
     * The race: outboxes of several processes claim scheduled mail at once. A claim holds its rows
     * until its transaction ends, and the other skips them: no message gets two timer runs.
     */
    it('race: a claim in flight holds its rows, a concurrent one takes the others', async () => {
      const ids = [];
      for (let i = 1; i <= 5; i++) ids.push((await scheduled(i)).id);
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let first!: string[];
      let claimed!: () => void;
      const claimedFirst = new Promise<void>((resolve) => (claimed = resolve));
      const firstTx = inTransaction(orm, async (em) => {
        first = (await claimScheduled(em, { mode: 'live', stream: 'transactional', after: horizon, limit: 3 })).map((r) => r.id);
        claimed();
        await held;
      });
      await Promise.race([claimedFirst, firstTx]);
      const second = (await claim({ limit: 10 })).map((r) => r.id);
      release();
      await firstTx;
      assert.deepEqual(first, ids.slice(0, 3));
      assert.deepEqual(second, ids.slice(3), 'the second claim skipped the rows the first holds');
    });
  });

  describe('handBackScheduled', () => {
    it('a queued message goes back to the outbox, marked handed back (the first time stays); it is never claimed again', async () => {
      const e = await scheduled(10, { enqueued_at: new Date() });
      assert.equal(await inTransaction(orm, (em) => handBackScheduled(em, e.id)), 'queued');
      const [first] = await sql(orm, 'select enqueued_at, handed_back_at from emails where id = $1', [e.id]);
      assert.equal(first.enqueued_at, null);
      assert.ok(first.handed_back_at);
      await sql(orm, 'update emails set enqueued_at = now() where id = $1', [e.id]);
      assert.equal(await inTransaction(orm, (em) => handBackScheduled(em, e.id)), 'queued');
      const [second] = await sql(orm, 'select enqueued_at, handed_back_at from emails where id = $1', [e.id]);
      assert.equal(second.enqueued_at, null);
      assert.equal(ms(second.handed_back_at), ms(first.handed_back_at), 'the first hand-back time stays');
      assert.deepEqual(await claim(), [], 'a handed-back message waits for the due claim, not another timer');
    });

    it('a message no longer queued stays as it is (its status is answered); an unknown id answers null', async () => {
      const enqueuedAt = new Date('2031-12-31T00:00:00.000Z');
      const e = await scheduled(10, { status: 'canceled', enqueued_at: enqueuedAt });
      assert.equal(await inTransaction(orm, (em) => handBackScheduled(em, e.id)), 'canceled');
      const [row] = await sql(orm, 'select enqueued_at, handed_back_at from emails where id = $1', [e.id]);
      assert.deepEqual([ms(row.enqueued_at), row.handed_back_at], [enqueuedAt.getTime(), null]);
      assert.equal(await inTransaction(orm, (em) => handBackScheduled(em, uuidv7())), null);
    });
  });
});
