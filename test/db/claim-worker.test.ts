import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { claimWorker } from '../../db/sql/claim-worker';
import { concurrently, insertWorker, openTestDb, sql, unique } from '../support/db-fixtures';

// This statement reads the database's clock (now()); heartbeats are dated relative to it.
describe('db/sql/claim-worker: an executor id is taken when free or held by a dead process; one claimant wins', function () {
  let orm: Orm;

  before(async () => {
    orm = await openTestDb('db_claim_worker');
  });
  after(async () => orm.close());

  const holder = async (id: string) => (await sql(orm, 'select host, pid from workers where id = $1', [id]))[0];
  const secondsAgo = (s: number) => new Date(Date.now() - s * 1000);

  it('a free id is taken', async () => {
    const id = unique('exec');
    assert.equal(await claimWorker(orm, id, 'host-a', 11, 30, -1), true);
    assert.deepEqual(await holder(id), { host: 'host-a', pid: 11 });
  });

  it('an id held by a live process (fresh heartbeat) is not taken', async () => {
    const id = unique('exec');
    await insertWorker(orm, id, { host: 'host-a', pid: 1, heartbeat_at: secondsAgo(5) });
    assert.equal(await claimWorker(orm, id, 'host-b', 22, 30, -1), false);
    assert.deepEqual(await holder(id), { host: 'host-a', pid: 1 });
  });

  it('an id whose heartbeat is older than dead-after is taken over', async () => {
    const id = unique('exec');
    await insertWorker(orm, id, { host: 'host-a', pid: 1, heartbeat_at: secondsAgo(60) });
    assert.equal(await claimWorker(orm, id, 'host-b', 22, 30, -1), true);
    assert.deepEqual(await holder(id), { host: 'host-b', pid: 22 });
    const [row] = await sql(orm, "select heartbeat_at > now() - interval '5 seconds' as fresh from workers where id = $1", [id]);
    assert.equal(row.fresh, true, 'its heartbeat starts now');
  });

  it('a fresh heartbeat is taken over when the caller saw its pid, on the same host, not running; not on another host', async () => {
    const id = unique('exec');
    await insertWorker(orm, id, { host: 'host-a', pid: 77, heartbeat_at: new Date() });
    assert.equal(await claimWorker(orm, id, 'host-b', 22, 30, 77), false, 'pid 77 of host-b says nothing of host-a');
    assert.equal(await claimWorker(orm, id, 'host-a', 23, 30, 76), false, 'another pid');
    assert.equal(await claimWorker(orm, id, 'host-a', 23, 30, 77), true);
    assert.deepEqual(await holder(id), { host: 'host-a', pid: 23 });
  });

  it('race: of processes claiming one free id at once, exactly one gets it, and holds it', async () => {
    const id = unique('exec');
    const results = await concurrently(8, (i) => claimWorker(orm, id, `host-${i}`, 100 + i, 30, -1));
    assert.equal(results.filter(Boolean).length, 1);
    const winner = results.indexOf(true);
    assert.deepEqual(await holder(id), { host: `host-${winner}`, pid: 100 + winner });
  });

  it('race: of processes taking over one dead id at once, exactly one gets it', async () => {
    const id = unique('exec');
    await insertWorker(orm, id, { heartbeat_at: secondsAgo(120) });
    const results = await concurrently(8, (i) => claimWorker(orm, id, `host-${i}`, 200 + i, 30, -1));
    assert.equal(results.filter(Boolean).length, 1);
  });
});
