import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { renewWorker } from '../../db/sql/renew-worker';
import { takeOverDeadWorkers } from '../../db/sql/take-over-dead-workers';
import { insertWorker, openTestDb, sql, unique } from '../support/db-fixtures';
import { Gate, installDbosSchema, waitForLockWaiters } from '../support/db-fixtures-rz';

describe('db/sql/renew-worker: the heartbeat of a process that still holds its row', function () {
  let orm: Orm;
  const stale = new Date(Date.now() - 3_600_000);

  before(async () => {
    orm = await openTestDb('db_renew_worker');
    await installDbosSchema(orm);
  });
  after(async () => orm.close());

  const heartbeat = async (id: string): Promise<Date | undefined> => {
    const [row] = await sql(orm, 'select heartbeat_at from workers where id = $1', [id]);
    return row ? new Date(row.heartbeat_at) : undefined;
  };

  it('moves the heartbeat forward for the same id, host and pid', async () => {
    const id = unique('exec');
    await insertWorker(orm, id, { host: 'h1', pid: 10, heartbeat_at: stale });
    assert.equal(await renewWorker(orm, id, 'h1', 10), true);
    const at = await heartbeat(id);
    assert.ok(at && at.getTime() > stale.getTime() + 3_000_000, `heartbeat renewed: ${at?.toISOString()}`);
  });

  it('answers false and leaves the row alone when another host or pid holds the id, or nobody does', async () => {
    const id = unique('exec');
    await insertWorker(orm, id, { host: 'h1', pid: 10, heartbeat_at: stale });
    assert.equal(await renewWorker(orm, id, 'h1', 11), false);
    assert.equal(await renewWorker(orm, id, 'h2', 10), false);
    assert.equal(await renewWorker(orm, unique('exec'), 'h1', 10), false);
    assert.equal((await heartbeat(id))?.getTime(), stale.getTime());
  });

  /**
   * The race with a take-over of the same stale row: both wait behind a lock on the row and are
   * released in a known order. Whichever goes first wins; the other must see its result (the
   * take-over re-checks the heartbeat, the renewal finds no row): never a row both renewed and
   * taken over.
   */
  for (const first of ['renew', 'take-over'] as const) {
    it(`race with a take-over of the same stale row, ${first} first: exactly one of them wins`, async () => {
      const id = unique('exec');
      await insertWorker(orm, id, { host: 'h1', pid: 10, heartbeat_at: stale });
      const gate = await Gate.hold(orm, ['select 1 from workers where id = $1 for update', [id]]);
      const renew = () => renewWorker(orm, id, 'h1', 10);
      const takeOver = () => takeOverDeadWorkers(orm, 60, unique('self'), '_dbos_internal_queue', 'svc');
      let renewed: Promise<boolean>;
      let taken: Promise<{ dead: string[] }>;
      try {
        if (first === 'renew') {
          renewed = renew();
          await waitForLockWaiters(orm, 1);
          taken = takeOver();
        } else {
          taken = takeOver();
          await waitForLockWaiters(orm, 1);
          renewed = renew();
        }
        await waitForLockWaiters(orm, 2);
      } finally {
        await gate.commit();
      }
      const [r, t] = await Promise.all([renewed!, taken!]);
      if (first === 'renew') {
        assert.equal(r, true, 'the renewal went first: it holds the row');
        assert.ok(!t.dead.includes(id), 'the take-over saw the fresh heartbeat and left the row');
        assert.ok(await heartbeat(id), 'the row is still there');
      } else {
        assert.deepEqual(t.dead.includes(id), true, 'the take-over went first: the row was dead');
        assert.equal(r, false, 'the renewal found its row taken over');
        assert.equal(await heartbeat(id), undefined);
      }
    });
  }
});
