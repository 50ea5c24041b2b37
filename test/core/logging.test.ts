import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { openOrm, migrate, type Orm } from '../../db/orm';
import { runPrepared } from '../../db/prepared';
import { createLogger, serializeError } from '../../core/logging';
import { newDatabase } from '../support/pg';

/** What a logger built by createLogger writes, one parsed line per entry. */
function capture() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      lines.push(JSON.parse(String(chunk)));
      cb();
    },
  });
  const log = createLogger('info', stream);
  return { log, lines };
}

describe('Core: logs name a failed statement, never the values in it', function () {
  this.timeout(60_000);
  let orm: Orm;
  const secret = `caller-${Date.now()}@private.example`;

  before(async () => {
    orm = await openOrm(await newDatabase('svc_logging'));
    await migrate(orm);
  });
  after(async () => orm.close());

  it('a MikroORM error (its message holds the inlined SQL) is logged as class, SQLSTATE and frames only', async () => {
    const err = await orm.em
      .fork()
      .getConnection()
      .execute('select ?::uuid', [secret])
      .then(
        () => assert.fail('the statement should fail'),
        (e: unknown) => e,
      );
    assert.ok(String((err as Error).message).includes(secret), 'the raw error does carry the value: the serializer is what keeps it out');
    const { log, lines } = capture();
    log.error({ err, errorId: 'e-1' }, 'unhandled error');
    const out = JSON.stringify(lines[0]);
    assert.ok(!out.includes(secret), out);
    assert.equal((lines[0].err as { sqlState: string }).sqlState, '22P02');
    assert.equal(lines[0].errorId, 'e-1');
  });

  it('a prepared statement error carries the statement name instead of its text', async () => {
    const err = await runPrepared(orm, { name: 'probe_statement_v1', text: 'select $1::uuid' }, [secret]).then(
      () => assert.fail('the statement should fail'),
      (e: unknown) => e,
    );
    const { log, lines } = capture();
    log.error({ err: new Error('store failed', { cause: err }) }, 'dispatch failed');
    const out = JSON.stringify(lines[0]);
    assert.ok(!out.includes(secret), out);
    assert.equal((lines[0].err as { cause: { statement: string } }).cause.statement, 'probe_statement_v1');
  });

  it('errors that are not database errors keep their message and fields', () => {
    const { log, lines } = capture();
    log.error({ err: Object.assign(new Error('plain failure'), { code: 'ECONNREFUSED' }) }, 'x');
    assert.equal((lines[0].err as { message: string }).message, 'plain failure');
    assert.equal((lines[0].err as { code: string }).code, 'ECONNREFUSED');
    assert.deepEqual(serializeError('not an error'), 'not an error');
  });
});
