import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { cancelBroadcast, cancelMessagesOf } from '../../db/sql/cancel-broadcast';
import { claimForDelivery } from '../../db/sql/claim-delivery';
import { concurrently, insertBroadcast, insertEmail, insertSender, ms, openTestDb, sql, type EmailOwner } from '../support/db-fixtures';

// Note: when the cancel changes the broadcast, the `status` it answers is the one its snapshot held
// (queued or sending), not `canceled`: the tests check the row instead (reported with issue 36).
describe('db/sql/cancel-broadcast: a broadcast not fully left is canceled with its queued messages, once', function () {
  let orm: Orm;
  let owner: EmailOwner;
  const now = new Date('2030-01-01T00:00:00Z');

  before(async () => {
    orm = await openTestDb('db_cancel_broadcast');
    ({ owner } = await insertSender(orm));
  });
  after(async () => orm.close());

  const statusOf = async (table: 'emails' | 'broadcasts', id: string) =>
    (await sql(orm, `select status from ${table} where id = $1`, [id]))[0].status;

  it('cancels a sending broadcast and its queued messages (parked ones too); a message being sent goes on', async () => {
    const b = await insertBroadcast(orm, owner, { status: 'sending', recipients: 4 });
    const queued = await insertEmail(orm, owner, { broadcast_id: b.id });
    const parked = await insertEmail(orm, owner, { broadcast_id: b.id, waiting_reason: 'daily_cap', waiting_until: now });
    const sending = await insertEmail(orm, owner, { broadcast_id: b.id, status: 'sending' });
    const sent = await insertEmail(orm, owner, { broadcast_id: b.id, status: 'sent' });
    const unrelated = await insertEmail(orm, owner);
    const result = await cancelBroadcast(orm, owner.organizationId, b.id, now);
    assert.deepEqual([result.changed, result.canceled], [true, 2]);
    const [row] = await sql(orm, 'select status, canceled_at from broadcasts where id = $1', [b.id]);
    assert.equal(row.status, 'canceled');
    assert.equal(ms(row.canceled_at), now.getTime());
    assert.equal(await statusOf('emails', queued.id), 'canceled');
    const [p] = await sql(orm, 'select status, waiting_reason, waiting_until from emails where id = $1', [parked.id]);
    assert.deepEqual([p.status, p.waiting_reason, p.waiting_until], ['canceled', null, null]);
    assert.equal(await statusOf('emails', sending.id), 'sending');
    assert.equal(await statusOf('emails', sent.id), 'sent');
    assert.equal(await statusOf('emails', unrelated.id), 'queued');
    // Canceled once: a second cancel changes nothing.
    assert.deepEqual(await cancelBroadcast(orm, owner.organizationId, b.id, now), { changed: false, canceled: 0, status: 'canceled' });
  });

  it('a queued broadcast (audience not frozen yet) is canceled', async () => {
    const b = await insertBroadcast(orm, owner);
    const result = await cancelBroadcast(orm, owner.organizationId, b.id, now);
    assert.deepEqual([result.changed, result.canceled], [true, 0]);
    assert.equal(await statusOf('broadcasts', b.id), 'canceled');
  });

  it('a broadcast fully left (fanned out, no message queued or sending) is not canceled; one fanned out with mail still queued is', async () => {
    const left = await insertBroadcast(orm, owner, { status: 'sending', fanned_out_at: now });
    await insertEmail(orm, owner, { broadcast_id: left.id, status: 'sent' });
    assert.deepEqual(await cancelBroadcast(orm, owner.organizationId, left.id, now), { changed: false, canceled: 0, status: 'sending' });
    const waiting = await insertBroadcast(orm, owner, { status: 'sending', fanned_out_at: now });
    await insertEmail(orm, owner, { broadcast_id: waiting.id, status: 'sent' });
    await insertEmail(orm, owner, { broadcast_id: waiting.id });
    const result = await cancelBroadcast(orm, owner.organizationId, waiting.id, now);
    assert.deepEqual([result.changed, result.canceled], [true, 1]);
    assert.equal(await statusOf('broadcasts', waiting.id), 'canceled');
  });

  it('a finished broadcast is not canceled', async () => {
    for (const status of ['sent', 'failed', 'canceled']) {
      const b = await insertBroadcast(orm, owner, { status });
      assert.deepEqual(await cancelBroadcast(orm, owner.organizationId, b.id, now), { changed: false, canceled: 0, status });
    }
  });

  it("another organization's broadcast is neither seen nor changed", async () => {
    const b = await insertBroadcast(orm, owner, { status: 'sending' });
    const e = await insertEmail(orm, owner, { broadcast_id: b.id });
    const stranger = await insertSender(orm);
    assert.deepEqual(await cancelBroadcast(orm, stranger.organization.id, b.id, now), { changed: false, canceled: 0, status: null });
    assert.equal(await statusOf('broadcasts', b.id), 'sending');
    assert.equal(await statusOf('emails', e.id), 'queued');
  });

  it('cancelMessagesOf sweeps the queued messages of that broadcast only', async () => {
    const b = await insertBroadcast(orm, owner, { status: 'canceled' });
    const other = await insertBroadcast(orm, owner, { status: 'sending' });
    const late = await insertEmail(orm, owner, { broadcast_id: b.id });
    const sending = await insertEmail(orm, owner, { broadcast_id: b.id, status: 'sending' });
    const others = await insertEmail(orm, owner, { broadcast_id: other.id });
    assert.equal(await cancelMessagesOf(orm, b.id, now), 1);
    assert.equal(await statusOf('emails', late.id), 'canceled');
    assert.equal(await statusOf('emails', sending.id), 'sending');
    assert.equal(await statusOf('emails', others.id), 'queued');
    assert.equal(await cancelMessagesOf(orm, b.id, now), 0);
  });

  it('race: of concurrent cancels, exactly one changes the broadcast, and each queued message is counted once', async () => {
    const b = await insertBroadcast(orm, owner, { status: 'sending' });
    for (let i = 0; i < 10; i++) await insertEmail(orm, owner, { broadcast_id: b.id });
    const results = await concurrently(6, () => cancelBroadcast(orm, owner.organizationId, b.id, now));
    assert.equal(results.filter((r) => r.changed).length, 1);
    assert.equal(
      results.reduce((n, r) => n + r.canceled, 0),
      10,
    );
    assert.equal(await statusOf('broadcasts', b.id), 'canceled');
  });

  it('race: a cancel and a delivery claim at once: each message is canceled or claimed, never both, and the count is of the canceled', async () => {
    for (let round = 0; round < 5; round++) {
      const b = await insertBroadcast(orm, owner, { status: 'sending' });
      const ids: string[] = [];
      for (let i = 0; i < 8; i++) ids.push((await insertEmail(orm, owner, { broadcast_id: b.id })).id);
      const [cancel, claim] = await Promise.all([
        cancelBroadcast(orm, owner.organizationId, b.id, now),
        orm.em.fork().transactional((em) => claimForDelivery(em, { owner: `run-${round}`, ids, at: now })),
      ]);
      const rows = await sql(orm, 'select id, status from emails where id = any($1::uuid[])', [ids]);
      const canceled = rows.filter((r) => r.status === 'canceled').map((r) => r.id);
      const sending = rows.filter((r) => r.status === 'sending').map((r) => r.id);
      assert.equal(canceled.length + sending.length, 8);
      assert.equal(cancel.canceled, canceled.length);
      assert.deepEqual(
        claim
          .filter((c) => c.outcome === 'claimed')
          .map((c) => c.id)
          .sort(),
        sending.sort(),
      );
    }
  });
});
