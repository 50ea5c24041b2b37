import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { claimOutbox, markEnqueued, outboxHasDue } from '../../db/sql/claim-outbox';
import { concurrently, insertEmail, insertSender, ms, openTestDb, sql, type EmailOwner, type Row } from '../support/db-fixtures';

describe('db/sql/claim-outbox: due messages of a mode and stream, oldest first, each claimed by one outbox', function () {
  let orm: Orm;
  let owner: EmailOwner;
  let org: Row;
  let domain: Row;
  const now = new Date('2030-01-01T12:00:00Z');
  const t = (s: number) => new Date(now.getTime() + s * 1000);

  before(async () => {
    orm = await openTestDb('db_claim_outbox');
    ({
      owner,
      organization: org,
      domain,
    } = await insertSender(orm, {
      organization: { plan: 'standard', daily_send_cap: 500 },
      domain: { warmup_stage: 2, warmup_checked_on: '2029-12-31' },
    }));
  });
  after(async () => orm.close());
  // The outbox is every organization's: each test starts with it empty.
  beforeEach(async () => {
    await sql(orm, 'update emails set enqueued_at = $1 where enqueued_at is null', [t(-99_999)]);
  });

  const claim = (q: { mode?: 'live' | 'test'; stream?: 'transactional' | 'bulk'; limit?: number; at?: Date } = {}) =>
    orm.em
      .fork()
      .transactional((em) =>
        claimOutbox(em, { mode: q.mode ?? 'live', stream: q.stream ?? 'transactional', now: q.at ?? now, limit: q.limit ?? 100 }),
      );

  it("claims due messages of the mode and stream, oldest due first, with their organization's and domain's allowances", async () => {
    const older = await insertEmail(orm, owner, { created_at: t(-30), kind: 'receipt' });
    const scheduledEarlier = await insertEmail(orm, owner, { created_at: t(-5), scheduled_at: t(-60) });
    const newer = await insertEmail(orm, owner, { created_at: t(-10), reserved_on: '2030-01-01' });
    await insertEmail(orm, owner, { created_at: t(-10), scheduled_at: t(60) }); // later
    await insertEmail(orm, owner, { created_at: t(1) }); // after now
    await insertEmail(orm, owner, { created_at: t(-10), mode: 'test' });
    await insertEmail(orm, owner, { created_at: t(-10), stream: 'bulk' });
    await insertEmail(orm, owner, { created_at: t(-10), waiting_reason: 'daily_cap', waiting_until: t(3600) }); // parked
    await insertEmail(orm, owner, { created_at: t(-10), enqueued_at: t(-5) }); // started
    const rows = await claim();
    assert.deepEqual(
      rows.map((r) => r.id),
      [scheduledEarlier.id, older.id, newer.id],
    );
    const [first, second, third] = rows;
    assert.equal(second.kind, 'receipt');
    assert.equal(first.kind, null);
    assert.equal(third.reserved_on, '2030-01-01');
    assert.equal(first.reserved_on, null);
    assert.deepEqual(
      [first.mode, first.stream, first.status, first.organization_id, first.domain_id],
      ['live', 'transactional', 'queued', org.id, domain.id],
    );
    assert.deepEqual([first.plan, first.daily_send_cap, first.warmup_stage, first.warmup_checked_on], ['standard', 500, 2, '2029-12-31']);
  });

  it('claims at most `limit`; a limit of 0 claims nothing', async () => {
    for (let i = 0; i < 4; i++) await insertEmail(orm, owner, { created_at: t(-10 + i) });
    assert.equal((await claim({ limit: 3 })).length, 3);
    assert.deepEqual(await claim({ limit: 0 }), []);
  });

  it('the other lanes: test mode and the bulk stream are claimed apart', async () => {
    const test = await insertEmail(orm, owner, { created_at: t(-1), mode: 'test' });
    const bulk = await insertEmail(orm, owner, { created_at: t(-1), stream: 'bulk' });
    assert.deepEqual(
      (await claim({ mode: 'test' })).map((r) => r.id),
      [test.id],
    );
    assert.deepEqual(
      (await claim({ stream: 'bulk' })).map((r) => r.id),
      [bulk.id],
    );
  });

  it('outboxHasDue: whether anything of the lane is due now (not later, not parked, not started)', async () => {
    const has = (at = now) => orm.em.fork().transactional((em) => outboxHasDue(em, { mode: 'live', stream: 'transactional', now: at }));
    assert.equal(await has(), false);
    await insertEmail(orm, owner, { created_at: t(-10), waiting_reason: 'daily_cap' });
    await insertEmail(orm, owner, { created_at: t(-10), scheduled_at: t(30) });
    await insertEmail(orm, owner, { created_at: t(-10), mode: 'test' });
    assert.equal(await has(), false);
    assert.equal(await has(t(30)), true, 'the scheduled one is due at its time');
    await insertEmail(orm, owner, { created_at: t(-10) });
    assert.equal(await has(), true);
  });

  it('markEnqueued takes messages out of the outbox', async () => {
    const a = await insertEmail(orm, owner, { created_at: t(-2) });
    const b = await insertEmail(orm, owner, { created_at: t(-1) });
    await orm.em.fork().transactional((em) => markEnqueued(em, [a.id], t(0)));
    await orm.em.fork().transactional((em) => markEnqueued(em, [], t(0)));
    assert.deepEqual(
      (await claim()).map((r) => r.id),
      [b.id],
    );
    const [row] = await sql(orm, 'select enqueued_at from emails where id = $1', [a.id]);
    assert.equal(ms(row.enqueued_at), t(0).getTime());
  });

  it('race: a claim while another outbox holds its rows skips them (SKIP LOCKED) and takes the next ones', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push((await insertEmail(orm, owner, { created_at: t(-10 + i) })).id);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let firstClaimed!: (ids: string[]) => void;
    const first = new Promise<string[]>((r) => (firstClaimed = r));
    const holder = orm.em.fork().transactional(async (em) => {
      firstClaimed((await claimOutbox(em, { mode: 'live', stream: 'transactional', now, limit: 3 })).map((r) => r.id));
      await held;
    });
    assert.deepEqual(await first, ids.slice(0, 3));
    const second = (await claim({ limit: 10 })).map((r) => r.id);
    release();
    await holder;
    assert.deepEqual(second, ids.slice(3));
  });

  it('race: concurrent outboxes that claim and mark take each message once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) ids.push((await insertEmail(orm, owner, { created_at: t(-100 + i) })).id);
    const taken = await concurrently(5, () =>
      orm.em.fork().transactional(async (em) => {
        const rows = await claimOutbox(em, { mode: 'live', stream: 'transactional', now, limit: 10 });
        await markEnqueued(
          em,
          rows.map((r) => r.id),
          now,
        );
        return rows.map((r) => r.id);
      }),
    );
    const all = taken.flat();
    assert.equal(all.length, 40);
    assert.equal(new Set(all).size, 40);
    assert.deepEqual([...all].sort(), [...ids].sort());
  });
});
