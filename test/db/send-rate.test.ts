import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { sendRateRoom, takeSendRate } from '../../db/sql/send-rate';
import { openTestDb, sql } from '../support/db-fixtures';
import { inTransaction, releasedTogether, values } from '../support/db-fixtures-rz';

describe('db/sql/send-rate: the platform send rate’s window, shared by every outbox', function () {
  let orm: Orm;
  // Each test takes window numbers of its own: a new window starts from zero.
  let window = 1_000;

  before(async () => {
    orm = await openTestDb('db_send_rate');
  });
  after(async () => orm.close());

  const take = (windowNo: number, want: number, limit = 10) => inTransaction(orm, (em) => takeSendRate(em, { windowNo, limit, want }));
  const row = async () => (await sql(orm, 'select window_no::int as window_no, used from send_rate where id = 1'))[0];

  it('grants what is left of the window, up to what is asked', async () => {
    const w = ++window;
    assert.equal(await take(w, 4), 4);
    assert.equal(await take(w, 4), 4);
    assert.equal(await take(w, 4), 2);
    assert.equal(await take(w, 4), 0);
    assert.deepEqual(await row(), { window_no: w, used: 10 });
  });

  it('a new window number starts from zero', async () => {
    const w = ++window;
    assert.equal(await take(w, 10), 10);
    assert.equal(await take(w + 1, 3), 3);
    assert.deepEqual(await row(), { window_no: w + 1, used: 3 });
    window++;
  });

  it('asking for nothing takes nothing and writes nothing; a lowered limit below what was taken grants nothing', async () => {
    const w = ++window;
    assert.equal(await take(w, 6), 6);
    assert.equal(await take(w, 0), 0);
    assert.equal(await take(w, -3), 0);
    assert.equal(await take(w, 5, 4), 0);
    assert.deepEqual(await row(), { window_no: w, used: 6 });
  });

  it('sendRateRoom: what is left in the window asked about (all of it in another window), without taking it', async () => {
    const w = ++window;
    await take(w, 7);
    assert.equal(await sendRateRoom(orm, { windowNo: w, limit: 10 }), 3);
    assert.equal(await sendRateRoom(orm, { windowNo: w, limit: 5 }), 0);
    assert.equal(await sendRateRoom(orm, { windowNo: w + 1, limit: 10 }), 10);
    assert.deepEqual(await row(), { window_no: w, used: 7 });
    window++;
  });

  /** The race: outboxes of several processes take from one window at once. They share it exactly. */
  it('race: concurrent takes never grant more than the limit in total, and every grant is counted', async () => {
    const w = ++window;
    const grants = values(
      await releasedTogether(
        orm,
        [['select 1 from send_rate where id = 1 for update']],
        Array.from({ length: 6 }, () => () => take(w, 3, 10)),
      ),
    );
    assert.equal(
      grants.reduce((a, b) => a + b, 0),
      10,
      `grants ${grants.join(', ')}`,
    );
    assert.deepEqual(await row(), { window_no: w, used: 10 });
  });
});
