import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { keysLastUsed } from '../../db/sql/key-last-used';
import { insertKey, insertOrganization, openTestDb, sql, type Row } from '../support/db-fixtures';

/** db/sql/key-last-used: a key's last request is its rate window's second; a key never charged has none. */
describe('db/sql/key-last-used', function () {
  let orm: Orm;
  let org: Row;

  before(async () => {
    orm = await openTestDb('db_key_last_used');
    org = await insertOrganization(orm);
  });
  after(async () => orm.close());

  it("answers each charged key's window start, and nothing for a key never charged or of no list", async () => {
    const used = await insertKey(orm, org.id);
    const idle = await insertKey(orm, org.id);
    await sql(orm, `insert into key_rate_windows (api_key_id, window_start, used) values ($1, '2026-11-27T10:00:05Z', 3)`, [used.id]);
    const found = await keysLastUsed(orm, [used.id, idle.id]);
    assert.equal(found.get(used.id)?.toISOString(), '2026-11-27T10:00:05.000Z');
    assert.equal(found.has(idle.id), false);
    assert.equal((await keysLastUsed(orm, [])).size, 0);
  });
});
