import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { cancelEmail } from '../../db/sql/cancel-emails';
import { cancelBroadcast } from '../../db/sql/cancel-broadcast';
import {
  insertBroadcast,
  insertDomain,
  insertEmail,
  insertRecipient,
  insertSender,
  lockWaiters,
  openTestDb,
  openTransaction,
  sql,
  type EmailOwner,
} from '../support/db-fixtures';

/**
 * db/sql/cancel-emails: the one cancel of queued messages. Its rule: only `queued` changes, in the
 * organization and the key's domains; each recipient still due gets one `canceled` event (issue
 * 51). Its race: against the worker's pick-up holding the row, exactly one wins.
 */
describe('db/sql/cancel-emails: a queued message canceled, with a canceled event per recipient still due', function () {
  let orm: Orm;
  let owner: EmailOwner;
  let other: EmailOwner;
  const now = new Date('2030-01-01T00:00:00.000Z');

  before(async () => {
    orm = await openTestDb('db_cancel_emails');
    ({ owner } = await insertSender(orm));
    ({ owner: other } = await insertSender(orm));
  });
  after(async () => orm.close());

  const cancel = (id: string, o = owner, domainIds: string[] | null = null) =>
    cancelEmail(orm, { id, organizationId: o.organizationId, domainIds, now });
  const events = async (emailId: string) =>
    (
      await sql<{ type: string; recipient: string; at: string }>(
        orm,
        'select type, recipient, at from email_events where email_id = $1 order by id',
        [emailId],
      )
    ).map((e) => [e.type, e.recipient, new Date(e.at).toISOString()]);
  const statusOf = async (id: string) => (await sql<{ status: string }>(orm, 'select status from emails where id = $1', [id]))[0].status;

  it('cancels a queued message: canceled, what it waited for cleared, an event for each recipient not yet settled', async () => {
    const e = await insertEmail(orm, owner, { waiting_reason: 'domain_daily_cap', waiting_until: now });
    await insertRecipient(orm, e.id, 'ann@example.com');
    await insertRecipient(orm, e.id, 'bob@example.com', { field: 'cc', state: 'in_flight' });
    await insertRecipient(orm, e.id, 'listed@example.com', { state: 'suppressed' });
    assert.deepEqual(await cancel(e.id), { canceled: true, status: 'canceled', started: false });
    const [row] = await sql(orm, 'select status, waiting_reason, waiting_until from emails where id = $1', [e.id]);
    assert.deepEqual(row, { status: 'canceled', waiting_reason: null, waiting_until: null });
    assert.deepEqual(await events(e.id), [
      ['canceled', 'ann@example.com', now.toISOString()],
      ['canceled', 'bob@example.com', now.toISOString()],
    ]);
  });

  it('changes nothing and writes no event when the message is not queued; answers its status', async () => {
    const sending = await insertEmail(orm, owner, { status: 'sending' });
    await insertRecipient(orm, sending.id, 'ann@example.com', { state: 'in_flight' });
    assert.deepEqual(await cancel(sending.id), { canceled: false, status: 'sending', started: false });
    const done = await insertEmail(orm, owner);
    await insertRecipient(orm, done.id, 'ann@example.com');
    await cancel(done.id);
    assert.deepEqual(await cancel(done.id), { canceled: false, status: 'canceled', started: false }, 'a second cancel');
    assert.equal((await events(done.id)).length, 1);
    assert.deepEqual(await events(sending.id), []);
  });

  it('says whether the message’s run had started (the outbox set enqueued_at), so its timer can be signaled', async () => {
    const waiting = await insertEmail(orm, owner, { enqueued_at: now, scheduled_at: new Date('2030-01-02T00:00:00.000Z') });
    assert.deepEqual(await cancel(waiting.id), { canceled: true, status: 'canceled', started: true });
  });

  it('sees only the organization’s messages, and a restricted key only its domains’', async () => {
    const theirs = await insertEmail(orm, other);
    assert.deepEqual(await cancel(theirs.id), { canceled: false, status: null, started: false });
    assert.equal(await statusOf(theirs.id), 'queued');
    const elsewhere = await insertDomain(orm, owner.organizationId);
    const e = await insertEmail(orm, owner);
    assert.deepEqual(await cancel(e.id, owner, [elsewhere.id]), { canceled: false, status: null, started: false });
    assert.deepEqual(await cancel(e.id, owner, [owner.domainId]), { canceled: true, status: 'canceled', started: false });
  });

  it('racing a pick-up that holds the row: the pick-up wins, the cancel answers sending and writes no event', async () => {
    const e = await insertEmail(orm, owner);
    await insertRecipient(orm, e.id, 'ann@example.com');
    const pickUp = await openTransaction(orm);
    await pickUp.query(`update emails set status = 'sending', claimed_by = 'run-1' where id = $1 and status = 'queued'`, [e.id]);
    const canceling = cancel(e.id);
    await lockWaiters(orm, 1);
    await pickUp.commit();
    assert.deepEqual(await canceling, { canceled: false, status: 'sending', started: false });
    assert.deepEqual(await events(e.id), []);
  });

  it('a broadcast’s cancel cancels its queued messages the same way, with their events', async () => {
    const b = await insertBroadcast(orm, owner);
    const queued = await insertEmail(orm, owner, { broadcast_id: b.id });
    await insertRecipient(orm, queued.id, 'ann@example.com');
    const left = await insertEmail(orm, owner, { broadcast_id: b.id, status: 'sent' });
    await insertRecipient(orm, left.id, 'bob@example.com', { state: 'sent' });
    const r = await cancelBroadcast(orm, owner.organizationId, b.id, now);
    assert.deepEqual([r.changed, r.canceled], [true, 1]);
    assert.deepEqual(await events(queued.id), [['canceled', 'ann@example.com', now.toISOString()]]);
    assert.deepEqual(await events(left.id), []);
  });
});
