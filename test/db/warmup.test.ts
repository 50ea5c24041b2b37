import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { currentWarmupStage, lastSendingDay, recordWarmupCheck } from '../../db/sql/warmup';
import { insertEmail, insertEmailEvent, insertRow, insertSender, openTestDb, sql, type Row } from '../support/db-fixtures';
import { inTransaction, releasedTogether, typed, values } from '../support/db-fixtures-rz';

describe('db/sql/warmup: the warm-up advance rule’s reads and its once-a-day record', function () {
  let orm: Orm;

  before(async () => {
    orm = await openTestDb('db_warmup');
  });
  after(async () => orm.close());

  const counter = (domainId: string, day: string, used: number, stage: number | null) =>
    insertRow(orm, 'send_counters', { scope: 'domain', scope_id: domainId, day, used, warmup_stage: stage });

  async function warmDomain(stage = 2): Promise<Awaited<ReturnType<typeof insertSender>>> {
    return insertSender(orm, { domain: { warmup_stage: stage } });
  }

  describe('lastSendingDay', () => {
    it('the domain’s last day before `before` with mail sent under a warm-up stage, with that day’s hard bounces and complaints', async () => {
      const s = await warmDomain();
      const d = s.owner.domainId;
      await counter(d, '2031-01-01', 40, 1);
      await counter(d, '2031-01-03', 70, 2);
      await counter(d, '2031-01-04', 0, 2); // nothing sent that day
      await counter(d, '2031-01-05', 10, null); // not under warm-up
      await counter(d, '2031-01-06', 99, 3); // not before `before`
      const day3: Row[] = [];
      for (let i = 0; i < 3; i++) day3.push(await insertEmail(orm, s.owner, { reserved_on: '2031-01-03' }));
      const day1 = await insertEmail(orm, s.owner, { reserved_on: '2031-01-01' });
      await insertEmailEvent(orm, typed(day3[0]), 'bounced', 'a@x.test', { bounce_type: 'hard' });
      await insertEmailEvent(orm, typed(day3[1]), 'bounced', 'b@x.test', { bounce_type: 'hard' });
      await insertEmailEvent(orm, typed(day3[1]), 'bounced', 'c@x.test', { bounce_type: 'soft' });
      await insertEmailEvent(orm, typed(day3[2]), 'complained', 'd@x.test');
      await insertEmailEvent(orm, typed(day3[2]), 'delivered', 'd@x.test');
      await insertEmailEvent(orm, typed(day1), 'bounced', 'e@x.test', { bounce_type: 'hard' });
      // Another domain's mail of the same day counts for that domain only.
      const o = await warmDomain();
      const theirs = await insertEmail(orm, o.owner, { reserved_on: '2031-01-03' });
      await insertEmailEvent(orm, typed(theirs), 'complained', 'f@x.test');
      const row = await inTransaction(orm, (em) => lastSendingDay(em, d, '2031-01-06'));
      assert.deepEqual(row, { day: '2031-01-03', sent: 70, stage: 2, hard_bounces: 2, complaints: 1 });
    });

    it('null when the domain has no such day (none before, or only another domain’s)', async () => {
      const s = await warmDomain();
      const o = await warmDomain();
      await counter(o.owner.domainId, '2031-02-01', 5, 1);
      await counter(s.owner.domainId, '2031-02-09', 5, 1);
      assert.equal(await inTransaction(orm, (em) => lastSendingDay(em, s.owner.domainId, '2031-02-09')), null);
    });
  });

  describe('recordWarmupCheck and currentWarmupStage', () => {
    it('moves the stage once a day, only from the stage it was decided from', async () => {
      const s = await warmDomain(2);
      const d = s.owner.domainId;
      const check = (day: string, fromStage: number, stage: number) =>
        inTransaction(orm, (em) => recordWarmupCheck(em, { domainId: d, day, fromStage, stage }));
      assert.equal(await check('2031-03-01', 1, 3), false, 'decided from a stale stage');
      assert.equal(await check('2031-03-01', 2, 3), true);
      assert.equal(await inTransaction(orm, (em) => currentWarmupStage(em, d)), 3);
      assert.equal(await check('2031-03-01', 3, 4), false, 'already ran today');
      assert.equal(await check('2031-03-02', 3, 3), true, 'the next day it runs again (here: no advance)');
      const [row] = await sql(orm, `select warmup_stage, warmup_checked_on::text as day from domains where id = $1`, [d]);
      assert.deepEqual(row, { warmup_stage: 3, day: '2031-03-02' });
    });

    it('currentWarmupStage: null for a domain not warming up', async () => {
      const s = await insertSender(orm);
      assert.equal(await inTransaction(orm, (em) => currentWarmupStage(em, s.owner.domainId)), null);
    });

    /** The race: every process's outbox runs the advance rule at the day's first pass. One advances the domain. */
    it('race: concurrent checks of one domain on one day, exactly one records, the stage advances once', async () => {
      const s = await warmDomain(4);
      const d = s.owner.domainId;
      const results = values(
        await releasedTogether(
          orm,
          [['select 1 from domains where id = $1 for update', [d]]],
          Array.from(
            { length: 5 },
            () => () => inTransaction(orm, (em) => recordWarmupCheck(em, { domainId: d, day: '2031-04-01', fromStage: 4, stage: 5 })),
          ),
        ),
      );
      assert.equal(results.filter(Boolean).length, 1, JSON.stringify(results));
      assert.equal(await inTransaction(orm, (em) => currentWarmupStage(em, d)), 5);
    });
  });
});
