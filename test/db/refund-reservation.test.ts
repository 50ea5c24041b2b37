import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { refundReservation } from '../../db/sql/refund-reservation';
import { insertKey, insertOrganization, insertRow, openTestDb, type Row } from '../support/db-fixtures';
import { rateWindow, releasedTogether, values } from '../support/db-fixtures-rz';

describe('db/sql/refund-reservation: a batch’s unused reservation given back to its window', function () {
  let orm: Orm;
  let org: Row;
  const W = new Date('2031-11-01T10:00:00.000Z');

  before(async () => {
    orm = await openTestDb('db_refund_reservation');
    org = await insertOrganization(orm);
  });
  after(async () => orm.close());

  async function keyWithWindow(used: number, windowStart = W): Promise<Row> {
    const key = await insertKey(orm, org.id);
    await insertRow(orm, 'key_rate_windows', { api_key_id: key.id, window_start: windowStart, used });
    return key;
  }

  it('gives back the tokens to the window they were taken from', async () => {
    const key = await keyWithWindow(100);
    await refundReservation(orm, key.id, W, 97);
    assert.equal((await rateWindow(orm, key.id))?.used, 3);
  });

  it('never below zero', async () => {
    const key = await keyWithWindow(4);
    await refundReservation(orm, key.id, W, 10);
    assert.equal((await rateWindow(orm, key.id))?.used, 0);
  });

  it('once the second has turned, the new window owes nothing', async () => {
    const key = await keyWithWindow(7, new Date(W.getTime() + 1000));
    await refundReservation(orm, key.id, W, 5);
    assert.equal((await rateWindow(orm, key.id))?.used, 7);
  });

  it('only the key’s own window; nothing for zero tokens', async () => {
    const key = await keyWithWindow(50);
    const other = await keyWithWindow(50);
    await refundReservation(orm, key.id, W, 20);
    await refundReservation(orm, key.id, W, 0);
    assert.equal((await rateWindow(orm, key.id))?.used, 30);
    assert.equal((await rateWindow(orm, other.id))?.used, 50);
  });

  /** Batches of one key finishing in one second: every refund is applied, none lost to another. */
  it('race: concurrent refunds to one window are all applied', async () => {
    const key = await keyWithWindow(100);
    values(
      await releasedTogether(
        orm,
        [['select 1 from key_rate_windows where api_key_id = $1 for update', [key.id]]],
        Array.from({ length: 8 }, () => () => refundReservation(orm, key.id, W, 5)),
      ),
    );
    assert.equal((await rateWindow(orm, key.id))?.used, 60);
  });
});
