import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { authenticateToken, type AuthenticatedRow } from '../../db/sql/authenticate';
import { concurrently, insertKey, ms, insertOrganization, insertToken, openTestDb, sql, type Row } from '../support/db-fixtures';

describe('db/sql/authenticate: the key of a token, its request charged to the key window', function () {
  let orm: Orm;
  let org: Row;

  before(async () => {
    orm = await openTestDb('db_authenticate');
    org = await insertOrganization(orm, { name: 'Auth Org', plan: 'standard' });
  });
  after(async () => orm.close());

  const windowOf = async (keyId: string) =>
    (await sql(orm, 'select window_start, used from key_rate_windows where api_key_id = $1', [keyId]))[0];

  /**
   * The window turns each second on the database's clock: a scenario whose charges straddle two
   * windows is run again on a fresh key (at most 5 times), so its counts are those of one window.
   */
  async function inOneWindow(
    rateLimit: number | null,
    scenario: (tokenHash: string) => Promise<(AuthenticatedRow | null)[]>,
  ): Promise<{ key: Row; rows: AuthenticatedRow[] }> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const key = await insertKey(orm, org.id, { rate_limit: rateLimit });
      const rows = (await scenario(key.token_hash)).map((r) => {
        assert.ok(r, 'a live key is found');
        return r;
      });
      if (new Set(rows.map((r) => ms(r.window_start))).size === 1) return { key, rows };
    }
    throw new Error('five attempts straddled a second each');
  }

  it('answers the key, its organization and plan, and admits a request within the window', async () => {
    const key = await insertKey(orm, org.id, { permission: 'send', mode: 'test', rate_limit: 7 });
    const row = await authenticateToken(orm, key.token_hash, 1, false);
    assert.ok(row);
    assert.equal(row.id, key.id);
    assert.equal(row.organization_id, org.id);
    assert.equal(row.org_name, 'Auth Org');
    assert.equal(row.plan, 'standard');
    assert.equal(row.permission, 'send');
    assert.equal(row.mode, 'test');
    assert.equal(row.rate_limit, 7);
    assert.equal(row.admitted, true);
    assert.equal((await windowOf(key.id)).used, 1);
  });

  it('no row, and no charge, for an unknown token, an expired superseded token or a revoked key', async () => {
    assert.equal(await authenticateToken(orm, 'f'.repeat(64), 1, false), null);
    const key = await insertKey(orm, org.id);
    const expired = await insertToken(orm, key.id, { expires_at: new Date(Date.now() - 1000) });
    assert.equal(await authenticateToken(orm, expired.token_hash, 1, false), null);
    assert.equal(await windowOf(key.id), undefined, 'a refused token charges nothing');
    const graced = await insertToken(orm, key.id, { expires_at: new Date(Date.now() + 3_600_000) });
    assert.equal((await authenticateToken(orm, graced.token_hash, 1, false))?.id, key.id, 'a superseded token within its grace');
    await sql(orm, 'update api_keys set revoked_at = now() where id = $1', [key.id]);
    const usedBefore = (await windowOf(key.id)).used;
    assert.equal(await authenticateToken(orm, key.token_hash, 1, false), null);
    assert.equal(await authenticateToken(orm, graced.token_hash, 1, false), null);
    assert.equal((await windowOf(key.id)).used, usedBefore, 'a revoked key is not charged');
  });

  it('admits up to rate_limit in a window; a refused request still counts as one', async () => {
    const { key, rows } = await inOneWindow(3, async (hash) => {
      const out: (AuthenticatedRow | null)[] = [];
      for (let i = 0; i < 5; i++) out.push(await authenticateToken(orm, hash, 1, false));
      return out;
    });
    assert.deepEqual(
      rows.map((r) => r.admitted),
      [true, true, true, false, false],
    );
    const w = await windowOf(key.id);
    assert.equal(w.used, 5);
  });

  it('without rate_limit the cap is 10; a batch (cost 100) passes in an empty window only, a refused one costs 1', async () => {
    const { key, rows } = await inOneWindow(null, async (hash) => [
      await authenticateToken(orm, hash, 100, false),
      await authenticateToken(orm, hash, 100, true),
      await authenticateToken(orm, hash, 100, true),
    ]);
    // A non-batch request of 100 is over the cap of 10: refused, counted as one. The window is then
    // not empty, so the batch is refused too.
    assert.deepEqual(
      rows.map((r) => r.admitted),
      [false, false, false],
    );
    const w = await windowOf(key.id);
    assert.equal(w.used, 3);

    const fresh = await inOneWindow(null, async (hash) => [
      await authenticateToken(orm, hash, 100, true),
      await authenticateToken(orm, hash, 1, false),
      await authenticateToken(orm, hash, 100, true),
    ]);
    assert.deepEqual(
      fresh.rows.map((r) => r.admitted),
      [true, false, false],
      'a batch in an empty window passes and takes its 100',
    );
    const fw = await windowOf(fresh.key.id);
    assert.equal(fw.used, 102);
  });

  it('race: concurrent requests of one key are admitted exactly up to its cap, every one counted once', async () => {
    const { key, rows } = await inOneWindow(5, (hash) => concurrently(12, () => authenticateToken(orm, hash, 1, false)));
    assert.equal(rows.filter((r) => r.admitted).length, 5);
    const w = await windowOf(key.id);
    assert.equal(w.used, 12);
  });

  it('the windows of two keys are apart: one key at its cap does not refuse the other', async () => {
    const { rows } = await inOneWindow(1, async (hash) => [
      await authenticateToken(orm, hash, 1, false),
      await authenticateToken(orm, hash, 1, false),
    ]);
    assert.deepEqual(
      rows.map((r) => r.admitted),
      [true, false],
    );
    const other = await insertKey(orm, org.id, { rate_limit: 1 });
    assert.equal((await authenticateToken(orm, other.token_hash, 1, false))?.admitted, true);
  });
});
