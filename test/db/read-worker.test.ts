import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { readWorker } from '../../db/sql/read-worker';
import { insertWorker, openTestDb, unique } from '../support/db-fixtures';

// read-worker.ts reads one row by primary key: no scoping, no race (whether the row is stale is
// decided by take-over-dead-workers.ts, tested there). One test of what it answers.
describe('db/sql/read-worker: who holds an executor id', function () {
  let orm: Orm;
  before(async () => {
    orm = await openTestDb('db_read_worker');
  });
  after(async () => orm.close());

  it('answers the host and pid of the id asked for (not another row), and null for an id nobody holds', async () => {
    const id = unique('exec');
    await insertWorker(orm, id, { host: 'host-a', pid: 4242 });
    await insertWorker(orm, unique('exec'), { host: 'host-b', pid: 7 });
    assert.deepEqual(await readWorker(orm, id), { host: 'host-a', pid: 4242 });
    assert.equal(await readWorker(orm, unique('exec')), null);
  });
});
