import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { claimForDelivery } from '../../db/sql/claim-delivery';
import { insertEmail, insertSender, lockWaiters, openTestDb, openTransaction, sql, type EmailOwner } from '../support/db-fixtures';

describe('db/sql/claim-delivery: a queued message is claimed by one owner; what kept it from being claimed otherwise', function () {
  let orm: Orm;
  let owner: EmailOwner;
  const at = new Date('2030-01-01T00:00:00Z');

  before(async () => {
    orm = await openTestDb('db_claim_delivery');
    ({ owner } = await insertSender(orm));
  });
  after(async () => orm.close());

  const claim = (q: { owner: string; ids: string[]; acceptUnowned?: boolean }) =>
    orm.em.fork().transactional((em) => claimForDelivery(em, { ...q, at }));
  const outcomes = (rows: { id: string; outcome: string }[]) => Object.fromEntries(rows.map((r) => [r.id, r.outcome]));
  const rowOf = async (id: string) => (await sql(orm, 'select status, claimed_by from emails where id = $1', [id]))[0];

  it('claims queued messages for the owner; a second claim by that owner resumes (claimed again)', async () => {
    const a = await insertEmail(orm, owner);
    const b = await insertEmail(orm, owner);
    assert.deepEqual(outcomes(await claim({ owner: 'run-1', ids: [a.id, b.id] })), { [a.id]: 'claimed', [b.id]: 'claimed' });
    assert.deepEqual(await rowOf(a.id), { status: 'sending', claimed_by: 'run-1' });
    assert.deepEqual(outcomes(await claim({ owner: 'run-1', ids: [a.id] })), { [a.id]: 'claimed' });
  });

  it("another owner's message answers `sending`; a message no longer queued answers its status; unknown ids are left out", async () => {
    const mine = await insertEmail(orm, owner);
    await claim({ owner: 'run-a', ids: [mine.id] });
    const canceled = await insertEmail(orm, owner, { status: 'canceled' });
    const sent = await insertEmail(orm, owner, { status: 'sent' });
    const rows = await claim({ owner: 'run-b', ids: [mine.id, canceled.id, sent.id, randomUUID()] });
    assert.deepEqual(outcomes(rows), { [mine.id]: 'sending', [canceled.id]: 'canceled', [sent.id]: 'sent' });
    assert.deepEqual(await rowOf(mine.id), { status: 'sending', claimed_by: 'run-a' });
    assert.equal((await rowOf(canceled.id)).status, 'canceled');
  });

  it('a message `sending` with no owner is resumed only with acceptUnowned', async () => {
    const old = await insertEmail(orm, owner, { status: 'sending', claimed_by: null });
    assert.deepEqual(outcomes(await claim({ owner: 'batch', ids: [old.id] })), { [old.id]: 'sending' });
    assert.deepEqual(outcomes(await claim({ owner: old.id, ids: [old.id], acceptUnowned: true })), { [old.id]: 'claimed' });
    assert.equal((await rowOf(old.id)).claimed_by, null, 'resumed, not re-owned');
  });

  it('no ids: nothing asked, nothing answered', async () => {
    assert.deepEqual(await claim({ owner: 'x', ids: [] }), []);
  });

  it('race: two owners claiming the same messages at once: each message goes to exactly one', async () => {
    for (let round = 0; round < 5; round++) {
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) ids.push((await insertEmail(orm, owner)).id);
      // The second names them in another order (a chunk grouped differently after a crash).
      const [a, b] = await Promise.all([claim({ owner: 'A', ids }), claim({ owner: 'B', ids: [...ids].reverse() })]);
      const rows = await sql(orm, 'select id, status, claimed_by from emails where id = any($1::uuid[])', [ids]);
      for (const r of rows) {
        assert.equal(r.status, 'sending');
        const winners = [outcomes(a)[r.id], outcomes(b)[r.id]].filter((o) => o === 'claimed');
        assert.equal(winners.length, 1, `message ${r.id} claimed once`);
        assert.equal(r.claimed_by, outcomes(a)[r.id] === 'claimed' ? 'A' : 'B');
      }
    }
  });

  it('race: a claim blocked behind a cancel that commits answers `canceled` (not the `queued` it first saw)', async () => {
    const e = await insertEmail(orm, owner);
    const cancel = await openTransaction(orm);
    await cancel.query(`update emails set status = 'canceled' where id = $1 and status = 'queued'`, [e.id]);
    const claiming = claim({ owner: 'run-c', ids: [e.id] });
    await lockWaiters(orm, 1);
    await cancel.commit();
    const rows = await claiming;
    assert.equal((await rowOf(e.id)).status, 'canceled', 'the cancel won');
    assert.deepEqual(outcomes(rows), { [e.id]: 'canceled' });
  });

  it("race: a claim blocked behind another owner's claim that commits answers `sending`", async () => {
    const e = await insertEmail(orm, owner);
    const other = await openTransaction(orm);
    await other.query(`update emails set status = 'sending', claimed_by = 'run-x' where id = $1 and status = 'queued'`, [e.id]);
    const claiming = claim({ owner: 'run-y', ids: [e.id] });
    await lockWaiters(orm, 1);
    await other.commit();
    const rows = await claiming;
    assert.deepEqual(await rowOf(e.id), { status: 'sending', claimed_by: 'run-x' });
    assert.deepEqual(outcomes(rows), { [e.id]: 'sending' });
  });
});
