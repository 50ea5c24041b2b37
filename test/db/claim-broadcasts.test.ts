import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { markBroadcastStarted, unstartedBroadcasts } from '../../db/sql/claim-broadcasts';
import { insertBroadcast, insertSender, ms, openTestDb, sql, type EmailOwner } from '../support/db-fixtures';

// No race to settle here: the dispatcher starts a run, then marks it; a start of a run that exists is a
// no-op, so a mark repeated or raced only has to keep the first time (tested below).
describe('db/sql/claim-broadcasts: the broadcast outbox, oldest first; a start is marked once', function () {
  let orm: Orm;
  let owner: EmailOwner;

  before(async () => {
    orm = await openTestDb('db_claim_broadcasts');
    ({ owner } = await insertSender(orm));
  });
  after(async () => orm.close());

  it('lists broadcasts whose run was not started, oldest first, up to the limit, with their schedule', async () => {
    const t = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s));
    const second = await insertBroadcast(orm, owner, { created_at: t(2), scheduled_at: t(100) });
    const first = await insertBroadcast(orm, owner, { created_at: t(1) });
    await insertBroadcast(orm, owner, { created_at: t(0), enqueued_at: t(0), status: 'sending' });
    const rows = await unstartedBroadcasts(orm, 10);
    assert.deepEqual(
      rows.map((r) => r.id),
      [first.id, second.id],
    );
    assert.equal(rows[0].organization_id, owner.organizationId);
    assert.equal(rows[0].scheduled_at, null);
    assert.equal(ms(rows[1].scheduled_at), t(100).getTime());
    assert.deepEqual(
      (await unstartedBroadcasts(orm, 1)).map((r) => r.id),
      [first.id],
    );
  });

  it('marks a broadcast started once: it leaves the outbox and a second mark keeps the first time', async () => {
    const b = await insertBroadcast(orm, owner);
    const t1 = new Date('2030-01-01T00:00:00Z');
    await markBroadcastStarted(orm, b.id, t1);
    await markBroadcastStarted(orm, b.id, new Date('2030-01-02T00:00:00Z'));
    const [row] = await sql(orm, 'select enqueued_at from broadcasts where id = $1', [b.id]);
    assert.equal(ms(row.enqueued_at), t1.getTime());
    assert.ok(!(await unstartedBroadcasts(orm, 100)).some((r) => r.id === b.id));
  });
});
