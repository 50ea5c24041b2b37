import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import { runPrepared, type PreparedStatement } from '../../db/prepared';
import { readPassEmails } from '../../db/sql/delivery-pass';
import { readContact } from '../../db/sql/read-contact';
import { insertPendingKey, listDkimKeys } from '../../db/sql/dkim-keys';
import {
  insertContact,
  insertEmail,
  insertOrganization,
  insertSender,
  insertSubscription,
  insertTopic,
  ms,
  openTestDb,
} from '../support/db-fixtures';

// What the raw-query paths really return, so the row types of db/sql/ can be trusted: the
// timestamps are text (db/sql/pg-types.ts, PgTimestamp), not Dates. If MikroORM's or pg's type
// parsers change, this fails first, and the declared types must change with them.

/** A timestamptz as PostgreSQL prints it in a row: `2026-12-01 23:14:24.693+00`. */
const PG_TIMESTAMPTZ = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?[+-]\d{2}(:\d{2})?$/;
/** A timestamptz inside JSON (`json_build_object`, `row_to_json`): `2026-12-01T23:14:24.693+00:00`. */
const PG_JSON_TIMESTAMPTZ = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?[+-]\d{2}:\d{2}$/;

const AT = new Date('2030-01-01T12:34:56.789Z');
/** The same instant for every `$1`, as knex `?` placeholders for the ORM's `execute`. */
const knexSql = (sql: string) => sql.replaceAll('$1', '?');
const knexParams = (sql: string) => Array((sql.match(/\$1/g) ?? []).length).fill(AT.toISOString());

const COLUMNS = `$1::timestamptz as tz, array[$1::timestamptz, $1::timestamptz + interval '1 second'] as tzs,
  $1::timestamp as ts, '2030-01-01'::date as d, interval '90 minutes' as iv,
  9007199254740993::int8 as big, (select count(*) from generate_series(1, 3)) as n, (select count(*)::int from generate_series(1, 3)) as n_int,
  1.50::numeric as num, 42::int4 as i, 0.5::float8 as f,
  jsonb_build_object('a', 1, 'at', $1::timestamptz) as j`;

interface Sample {
  tz: unknown;
  tzs: unknown;
  ts: unknown;
  d: unknown;
  iv: unknown;
  big: unknown;
  n: unknown;
  n_int: unknown;
  num: unknown;
  i: unknown;
  f: unknown;
  j: unknown;
}

function assertDriverTypes(row: Sample) {
  assert.equal(typeof row.tz, 'string', 'timestamptz');
  assert.match(row.tz as string, PG_TIMESTAMPTZ);
  assert.equal(ms(row.tz as string), AT.getTime(), 'the text parses back to the instant');
  assert.ok(Array.isArray(row.tzs), 'timestamptz[]');
  for (const t of row.tzs as unknown[]) {
    assert.equal(typeof t, 'string');
    assert.match(t as string, PG_TIMESTAMPTZ);
  }
  assert.equal(typeof row.ts, 'string', 'timestamp');
  assert.equal(row.d, '2030-01-01', 'date');
  assert.equal(typeof row.iv, 'string', 'interval');
  assert.equal(row.big, '9007199254740993', 'int8');
  assert.equal(row.n, '3', 'count(*) without a cast');
  assert.equal(row.n_int, 3, 'count(*)::int');
  assert.equal(row.num, '1.50', 'numeric');
  assert.equal(row.i, 42, 'int4');
  assert.equal(row.f, 0.5, 'float8');
  assert.equal(typeof row.j, 'object', 'jsonb is parsed');
  const j = row.j as { a: unknown; at: unknown };
  assert.equal(j.a, 1);
  assert.equal(typeof j.at, 'string', 'a timestamp inside JSON is text');
  assert.match(j.at as string, PG_JSON_TIMESTAMPTZ);
}

describe('the raw-query paths: what the driver returns (db/sql/pg-types.ts)', function () {
  let orm: Orm;

  before(async () => {
    orm = await openTestDb('db_driver_types');
  });
  after(async () => orm.close());

  it('runPrepared: timestamps (and their arrays) text, int8, count and numeric text, int4 and float8 numbers, jsonb parsed', async () => {
    const statement: PreparedStatement = { name: 'driver_types_test_v1', text: `select ${COLUMNS}` };
    const [row] = await runPrepared<Sample>(orm, statement, [AT]);
    assertDriverTypes(row);
  });

  it('em.execute: the same', async () => {
    const [row] = await orm.em.fork().execute<Sample[]>(knexSql(`select ${COLUMNS}`), knexParams(COLUMNS));
    assertDriverTypes(row as Sample);
  });

  it('getConnection().execute: the same', async () => {
    const [row] = await orm.em
      .fork()
      .getConnection()
      .execute<Sample[]>(knexSql(`select ${COLUMNS}`), knexParams(COLUMNS));
    assertDriverTypes(row);
  });

  describe('row readers: their timestamp fields are text at run time', () => {
    it('readPassEmails (runPrepared): created_at and scheduled_at', async () => {
      const { owner } = await insertSender(orm);
      const scheduled = new Date(AT.getTime() + 3_600_000);
      const e = await insertEmail(orm, owner, { created_at: AT, scheduled_at: scheduled });
      const [read] = await readPassEmails(orm, [e.id]);
      assert.equal(typeof read.created_at, 'string');
      assert.match(read.created_at, PG_TIMESTAMPTZ);
      assert.equal(ms(read.created_at), AT.getTime());
      assert.match(read.scheduled_at!, PG_TIMESTAMPTZ);
      assert.equal(ms(read.scheduled_at), scheduled.getTime());
    });

    it("readContact (runPrepared): created_at and updated_at, and a subscription's changed_at (JSON)", async () => {
      const org = await insertOrganization(orm);
      const c = await insertContact(orm, org.id, { created_at: AT, updated_at: AT });
      const topic = await insertTopic(orm, org.id);
      await insertSubscription(orm, c.id, topic.id, 'unsubscribed', { changed_at: AT });
      const read = (await readContact(orm, org.id, { id: c.id, email: null }))!;
      assert.match(read.created_at, PG_TIMESTAMPTZ);
      assert.match(read.updated_at, PG_TIMESTAMPTZ);
      assert.equal(ms(read.created_at), AT.getTime());
      const [s] = read.subscriptions;
      assert.match(s.changed_at!, PG_JSON_TIMESTAMPTZ);
      assert.equal(ms(s.changed_at), AT.getTime());
    });

    it('listDkimKeys (em.getConnection().execute): created_at; unset ones null', async () => {
      const { domain } = await insertSender(orm);
      await insertPendingKey(orm.em.fork(), {
        id: uuidv7(),
        domainId: domain.id,
        selector: 'driver1',
        publicKey: 'public',
        privateKeyEnc: 'sealed',
        now: AT,
      });
      const [key] = await listDkimKeys(orm.em.fork(), domain.id);
      assert.equal(typeof key.created_at, 'string');
      assert.match(key.created_at, PG_TIMESTAMPTZ);
      assert.equal(ms(key.created_at), AT.getTime());
      assert.equal(key.activated_at, null);
    });
  });
});
