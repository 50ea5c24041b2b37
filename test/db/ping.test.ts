import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { ping } from '../../db/sql/ping';
import { openTestDb } from '../support/db-fixtures';

// ping.ts has no rule beyond "answers whether the database answers" and no race: one test.
describe('db/sql/ping: whether the database answers', function () {
  it('answers true on an open database and false once its pool is closed', async () => {
    const orm: Orm = await openTestDb('db_ping');
    assert.equal(await ping(orm), true);
    await orm.close();
    assert.equal(await ping(orm), false);
  });
});
