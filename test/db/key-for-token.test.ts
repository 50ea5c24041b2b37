import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { keyForToken } from '../../db/sql/key-for-token';
import { insertKey, insertOrganization, insertToken, openTestDb, sql, type Row } from '../support/db-fixtures';

describe('db/sql/key-for-token: the live key a token names', function () {
  let orm: Orm;
  let org: Row;

  before(async () => {
    orm = await openTestDb('db_key_for_token');
    org = await insertOrganization(orm);
  });
  after(async () => orm.close());

  const keyOf = async (tokenHash: string): Promise<string[]> =>
    (await sql(orm, `select a.id from ${keyForToken('$1')}`, [tokenHash])).map((r) => r.id);

  it('finds the key of its current token, and nothing for an unknown hash', async () => {
    const key = await insertKey(orm, org.id);
    assert.deepEqual(await keyOf(key.token_hash), [key.id]);
    assert.deepEqual(await keyOf('0'.repeat(64)), []);
  });

  it('a superseded token works until its own expiry, not after', async () => {
    const key = await insertKey(orm, org.id);
    const graced = await insertToken(orm, key.id, { expires_at: new Date(Date.now() + 3_600_000) });
    const ended = await insertToken(orm, key.id, { expires_at: new Date(Date.now() - 1_000) });
    assert.deepEqual(await keyOf(graced.token_hash), [key.id]);
    assert.deepEqual(await keyOf(ended.token_hash), []);
  });

  it('a revoked key is found by none of its tokens', async () => {
    const key = await insertKey(orm, org.id);
    const graced = await insertToken(orm, key.id, { expires_at: new Date(Date.now() + 3_600_000) });
    await sql(orm, 'update api_keys set revoked_at = now() where id = $1', [key.id]);
    assert.deepEqual(await keyOf(key.token_hash), []);
    assert.deepEqual(await keyOf(graced.token_hash), []);
  });
});
