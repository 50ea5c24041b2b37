import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { parkedDomains, unpark, usedOn } from '../../db/sql/release-parked';
import { PLATFORM_SCOPE_ID } from '../../db/sql/reserve-send';
import { insertDomain, insertEmail, insertRow, insertSender, ms, openTestDb, sql, type EmailOwner } from '../support/db-fixtures';
import { inTransaction } from '../support/db-fixtures-rz';

describe('db/sql/release-parked: parked mail let back into the outbox', function () {
  let orm: Orm;
  const t0 = new Date('2031-08-01T00:00:00.000Z');
  const at = (minutes: number) => new Date(t0.getTime() + minutes * 60_000);

  before(async () => {
    orm = await openTestDb('db_release_parked');
  });
  after(async () => orm.close());
  // The release serves every organization: each test starts with nothing parked.
  beforeEach(async () => {
    await sql(orm, 'update emails set waiting_reason = null, waiting_until = null, enqueued_at = now() where waiting_reason is not null');
  });

  const park = (owner: EmailOwner, createdMinutes: number, reason = 'domain_daily_cap') =>
    insertEmail(orm, owner, { created_at: at(createdMinutes), waiting_reason: reason, waiting_until: at(24 * 60) });
  const parked = async (domainId: string) =>
    (await sql(orm, 'select id from emails where domain_id = $1 and waiting_reason is not null order by created_at, id', [domainId])).map(
      (r) => r.id,
    );

  describe('parkedDomains', () => {
    it('lists each domain with parked mail once, by its oldest parked message, with what its allowances depend on', async () => {
      const s1 = await insertSender(orm, { organization: { plan: 'standard', daily_send_cap: 500 }, domain: { warmup_stage: 3 } });
      const s2 = await insertSender(orm);
      const d3 = await insertDomain(orm, s1.organization.id);
      const idle = await insertSender(orm);
      await park(s1.owner, 30);
      await park(s1.owner, 5);
      await park(s2.owner, 10);
      await park({ ...s1.owner, domainId: d3.id }, 1, 'organization_daily_cap');
      await insertEmail(orm, idle.owner, { created_at: at(0) }); // queued, not parked
      const rows = await inTransaction(orm, (em) => parkedDomains(em));
      assert.deepEqual(
        rows.map((r) => ({ ...r, oldest: ms(r.oldest) })),
        [
          {
            domain_id: d3.id,
            organization_id: s1.organization.id,
            plan: 'standard',
            daily_send_cap: 500,
            warmup_stage: null,
            oldest: at(1).getTime(),
          },
          {
            domain_id: s1.domain.id,
            organization_id: s1.organization.id,
            plan: 'standard',
            daily_send_cap: 500,
            warmup_stage: 3,
            oldest: at(5).getTime(),
          },
          {
            domain_id: s2.domain.id,
            organization_id: s2.organization.id,
            plan: 'free',
            daily_send_cap: null,
            warmup_stage: null,
            oldest: at(10).getTime(),
          },
        ],
      );
    });

    it('nothing parked: no rows', async () => {
      assert.deepEqual(await inTransaction(orm, (em) => parkedDomains(em)), []);
    });
  });

  describe('usedOn', () => {
    it('the day’s counters of the scopes asked for, and the platform’s, by scope and id', async () => {
      const s = await insertSender(orm);
      const o = await insertSender(orm);
      const day = '2031-08-02';
      await insertRow(orm, 'send_counters', { scope: 'platform', scope_id: PLATFORM_SCOPE_ID, day, used: 900 });
      await insertRow(orm, 'send_counters', { scope: 'organization', scope_id: s.organization.id, day, used: 40 });
      await insertRow(orm, 'send_counters', { scope: 'domain', scope_id: s.domain.id, day, used: 30 });
      await insertRow(orm, 'send_counters', { scope: 'domain', scope_id: s.domain.id, day: '2031-08-01', used: 7 });
      await insertRow(orm, 'send_counters', { scope: 'organization', scope_id: o.organization.id, day, used: 3 });
      const used = await inTransaction(orm, (em) => usedOn(em, day, [s.organization.id, s.domain.id]));
      assert.deepEqual(
        [...used.entries()].sort(),
        [
          [`domain:${s.domain.id}`, 30],
          [`organization:${s.organization.id}`, 40],
          [`platform:${PLATFORM_SCOPE_ID}`, 900],
        ].sort(),
      );
    });
  });

  describe('unpark', () => {
    it('wakes the n oldest parked messages of the domain, in creation order, and only that domain’s', async () => {
      const s = await insertSender(orm);
      const o = await insertSender(orm);
      const ids = [(await park(s.owner, 3)).id, (await park(s.owner, 1)).id, (await park(s.owner, 2)).id];
      const theirs = await park(o.owner, 0);
      assert.equal(await inTransaction(orm, (em) => unpark(em, s.domain.id, 2)), 2);
      assert.deepEqual(await parked(s.domain.id), [ids[0]], 'the newest stays parked');
      const [woken] = await sql(orm, 'select waiting_reason, waiting_until from emails where id = $1', [ids[1]]);
      assert.deepEqual(woken, { waiting_reason: null, waiting_until: null });
      assert.deepEqual(await parked(o.domain.id), [theirs.id]);
      assert.equal(await inTransaction(orm, (em) => unpark(em, s.domain.id, 5)), 1, 'answers how many woke');
    });

    /**
     * The race: release passes of several processes at once. A pass holds the messages it woke
     * until it commits, and another skips them: no message is let back twice, none is lost.
     */
    it('race: a release in flight holds what it woke, a concurrent one takes the next ones', async () => {
      const s = await insertSender(orm);
      const ids = [];
      for (let i = 0; i < 5; i++) ids.push((await park(s.owner, i)).id);
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let woke!: () => void;
      const first = new Promise<void>((resolve) => (woke = resolve));
      let firstCount = 0;
      const firstTx = inTransaction(orm, async (em) => {
        firstCount = await unpark(em, s.domain.id, 3);
        woke();
        await held;
      });
      await Promise.race([first, firstTx]);
      const secondCount = await inTransaction(orm, (em) => unpark(em, s.domain.id, 3));
      release();
      await firstTx;
      assert.deepEqual([firstCount, secondCount], [3, 2]);
      assert.deepEqual(await parked(s.domain.id), []);
    });
  });
});
