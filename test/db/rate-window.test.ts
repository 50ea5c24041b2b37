import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { admits, capOf, chargeRequest, chargeWindows, DEFAULT_RATE_LIMIT, refundWindow, requestsByToken } from '../../db/sql/rate-window';
import { insertKey, insertOrganization, insertRow, ms, openTestDb, sql, type Row } from '../support/db-fixtures';
import { rateWindow, releasedTogether, values } from '../support/db-fixtures-rz';

/**
 * rate-window.ts holds no statement of its own: it is the per-key window rule that authenticate,
 * the send store, contact upserts and events are built from. Each piece is tested here inside a
 * minimal statement, so a broken rule is named here rather than in every statement built on it.
 */
describe('db/sql/rate-window: the per-key request window', function () {
  let orm: Orm;
  let org: Row;

  before(async () => {
    orm = await openTestDb('db_rate_window');
    org = await insertOrganization(orm);
  });
  after(async () => orm.close());

  interface Charge {
    window_start: string;
    used: number;
    admitted: boolean;
  }
  const charge = async (keyId: string, cost: number, batch = false): Promise<Charge> =>
    (
      await sql<Charge>(
        orm,
        `with k as (select id, rate_limit from api_keys where id = $1), charged as (${chargeRequest('k', '$2::int', '$3::boolean')})
         select window_start, used, admitted from charged`,
        [keyId, cost, batch],
      )
    )[0];

  /**
   * The window turns each second on the database's clock: a scenario whose charges straddle two
   * windows is run again on a fresh key (at most 5 times), so its counts are those of one window.
   */
  async function inOneWindow<T extends { window_start: string }>(
    rateLimit: number | null,
    scenario: (key: Row) => Promise<T[]>,
  ): Promise<{ key: Row; rows: T[] }> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const key = await insertKey(orm, org.id, { rate_limit: rateLimit });
      const rows = await scenario(key);
      if (new Set(rows.map((r) => ms(r.window_start))).size === 1) return { key, rows };
    }
    throw new Error('five attempts straddled a second each');
  }

  it('capOf: the key’s rate_limit, else the default of 10', async () => {
    assert.equal(DEFAULT_RATE_LIMIT, 10);
    const [row] = await sql(orm, `select ${capOf('$1::int')} as given, ${capOf('null::int')} as dflt`, [7]);
    assert.deepEqual(row, { given: 7, dflt: 10 });
  });

  it('admits: a request passes while the window has room; a batch also when the window is empty', async () => {
    const cases: [number, number, number, boolean, boolean][] = [
      // used before, cost, cap, batch → admitted
      [0, 1, 1, false, true],
      [1, 1, 1, false, false],
      [9, 1, 10, false, true],
      [5, 6, 10, false, false],
      [0, 100, 10, false, false],
      [0, 100, 10, true, true],
      [1, 100, 10, true, false],
      [0, 5, 10, true, true],
    ];
    for (const [before, cost, cap, batch, expected] of cases) {
      const [row] = await sql(orm, `select ${admits('$1::int', '$2::int', '$3::int', '$4::boolean')} as ok`, [before, cost, cap, batch]);
      assert.equal(row.ok, expected, `used ${before}, cost ${cost}, cap ${cap}, batch ${batch}`);
    }
  });

  describe('chargeRequest', () => {
    it('admits up to the cap in a window; a refused request counts as one', async () => {
      const { key, rows } = await inOneWindow(3, async (k) => {
        const out = [];
        for (let i = 0; i < 5; i++) out.push(await charge(k.id, 1));
        return out;
      });
      assert.deepEqual(
        rows.map((r) => [r.admitted, r.used]),
        [
          [true, 1],
          [true, 2],
          [true, 3],
          [false, 4],
          [false, 5],
        ],
      );
      assert.deepEqual([(await rateWindow(orm, key.id))?.used, (await rateWindow(orm, key.id))?.admitted], [5, false]);
    });

    it('a batch passes in an empty window whatever its cost and is charged it; in a used window it is refused and counts one', async () => {
      const { rows } = await inOneWindow(null, async (k) => [
        await charge(k.id, 100, true),
        await charge(k.id, 1),
        await charge(k.id, 100, true),
      ]);
      assert.deepEqual(
        rows.map((r) => [r.admitted, r.used]),
        [
          [true, 100],
          [false, 101],
          [false, 102],
        ],
      );
      const { rows: late } = await inOneWindow(null, async (k) => [await charge(k.id, 1), await charge(k.id, 100, true)]);
      assert.deepEqual(
        late.map((r) => [r.admitted, r.used]),
        [
          [true, 1],
          [false, 2],
        ],
      );
    });

    it('the default cap of 10 applies to a key without rate_limit', async () => {
      const { rows } = await inOneWindow(null, async (k) => {
        const out = [];
        for (let i = 0; i < 11; i++) out.push(await charge(k.id, 1));
        return out;
      });
      assert.deepEqual(
        rows.map((r) => r.admitted),
        [...Array(10).fill(true), false],
      );
    });

    it('a window of an earlier second is started afresh', async () => {
      const key = await insertKey(orm, org.id, { rate_limit: 2 });
      await insertRow(orm, 'key_rate_windows', { api_key_id: key.id, window_start: new Date('2031-01-01T00:00:00Z'), used: 500 });
      const r = await charge(key.id, 1);
      assert.deepEqual([r.admitted, r.used], [true, 1]);
      assert.ok(ms(r.window_start)! > Date.now() - 60_000, 'charged to the current second');
    });

    /**
     * The race: one key's requests at once, on every process. Each charge decides against the
     * count the others left (the row is locked), so the window admits exactly its cap and counts
     * every request.
     */
    it('race: concurrent requests of one key, exactly the cap admitted, every request counted', async () => {
      const { key, rows } = await inOneWindow(4, async (k) => {
        await insertRow(orm, 'key_rate_windows', { api_key_id: k.id, window_start: new Date('2031-01-01T00:00:00Z'), used: 0 });
        return values(
          await releasedTogether(
            orm,
            [['select 1 from key_rate_windows where api_key_id = $1 for update', [k.id]]],
            Array.from({ length: 9 }, () => () => charge(k.id, 1)),
          ),
        );
      });
      assert.equal(rows.filter((r) => r.admitted).length, 4, JSON.stringify(rows));
      assert.deepEqual(
        rows.map((r) => r.used).sort((a, b) => a - b),
        [1, 2, 3, 4, 5, 6, 7, 8, 9],
        'each charge saw the one before it',
      );
      assert.equal((await rateWindow(orm, key.id))?.used, 9);
    });
  });

  describe('chargeWindows', () => {
    const group = async (charges: [string, number][]) =>
      sql<{ api_key_id: string; window_start: string; used: number }>(
        orm,
        chargeWindows(`select x.api_key_id, x.used from jsonb_to_recordset($1::jsonb) as x(api_key_id uuid, used int)`),
        [JSON.stringify(charges.map(([api_key_id, used]) => ({ api_key_id, used })))],
      );

    it('charges each key its group’s sum, adding to the window of this second, and answers the count after', async () => {
      const { key, rows } = await inOneWindow(null, async (k) => [...(await group([[k.id, 3]])), ...(await group([[k.id, 4]]))]);
      assert.deepEqual(
        rows.map((r) => [r.api_key_id, r.used]),
        [
          [key.id, 3],
          [key.id, 7],
        ],
      );
    });

    it('several keys in one charge, each its own window; an earlier second’s window restarts', async () => {
      const a = await insertKey(orm, org.id);
      const b = await insertKey(orm, org.id);
      await insertRow(orm, 'key_rate_windows', { api_key_id: b.id, window_start: new Date('2031-01-01T00:00:00Z'), used: 80 });
      const rows = await group([
        [b.id, 2],
        [a.id, 5],
      ]);
      assert.deepEqual(
        new Map(rows.map((r) => [r.api_key_id, r.used])),
        new Map([
          [a.id, 5],
          [b.id, 2],
        ]),
      );
    });

    it('race: concurrent group charges of one key are all counted', async () => {
      const { key, rows } = await inOneWindow(null, async (k) => {
        await insertRow(orm, 'key_rate_windows', { api_key_id: k.id, window_start: new Date('2031-01-01T00:00:00Z'), used: 0 });
        return values(
          await releasedTogether(
            orm,
            [['select 1 from key_rate_windows where api_key_id = $1 for update', [k.id]]],
            Array.from({ length: 6 }, () => async () => (await group([[k.id, 2]]))[0]),
          ),
        );
      });
      assert.deepEqual(
        rows.map((r) => r.used).sort((a, b) => a - b),
        [2, 4, 6, 8, 10, 12],
      );
      assert.equal((await rateWindow(orm, key.id))?.used, 12);
    });
  });

  it('refundWindow: gives back to the window it names only, never below zero', async () => {
    const key = await insertKey(orm, org.id);
    const W = new Date('2031-01-01T00:00:05Z');
    await insertRow(orm, 'key_rate_windows', { api_key_id: key.id, window_start: W, used: 10 });
    await sql(orm, refundWindow('$1', '$2', '$3::int'), [key.id, new Date(W.getTime() - 1000), 4]);
    assert.equal((await rateWindow(orm, key.id))?.used, 10);
    await sql(orm, refundWindow('$1', '$2', '$3::int'), [key.id, W, 4]);
    assert.equal((await rateWindow(orm, key.id))?.used, 6);
    await sql(orm, refundWindow('$1', '$2', '$3::int'), [key.id, W, 40]);
    assert.equal((await rateWindow(orm, key.id))?.used, 0);
  });

  it('requestsByToken: each request with its key, admitted in order over the window; an unknown token has no row', async () => {
    const { key, rows } = await inOneWindow(2, async (a) => {
      const b = await insertKey(orm, org.id, { rate_limit: 2 });
      const q = [a.token_hash, a.token_hash, 'f'.repeat(64), a.token_hash, b.token_hash, a.token_hash].map((token_hash, req) => ({
        req,
        token_hash,
      }));
      const out = await sql<{ req: number; id: string; organization_id: string; cap: number; admitted: boolean; window_start: string }>(
        orm,
        `with q as (select * from jsonb_to_recordset($1::jsonb) as x(req int, token_hash text)), ${requestsByToken('q')}
         select p.req, p.id, p.organization_id, p.cap, p.admitted, c.window_start from p join charged c on c.api_key_id = p.id order by p.req`,
        [JSON.stringify(q)],
      );
      return out.map((r) => ({ ...r, key: r.id === a.id ? 'a' : 'b' }));
    });
    assert.deepEqual(
      rows.map((r) => [r.req, r.key, r.admitted]),
      [
        [0, 'a', true],
        [1, 'a', true],
        [3, 'a', false],
        [4, 'b', true],
        [5, 'a', false],
      ],
    );
    assert.ok(rows.every((r) => r.organization_id === org.id && r.cap === 2));
    assert.equal((await rateWindow(orm, key.id))?.used, 4, 'every request of the key counted, refused ones too');
  });
});
