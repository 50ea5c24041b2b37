import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { broadcastProgress } from '../../db/sql/broadcast-progress';
import { insertBroadcast, insertEmail, insertEmailEvent, insertSender, openTestDb, type EmailOwner } from '../support/db-fixtures';

// A read of counts: no race of its own.
describe("db/sql/broadcast-progress: each broadcast's messages by status, and its unsubscribes", function () {
  let orm: Orm;
  let owner: EmailOwner;

  before(async () => {
    orm = await openTestDb('db_broadcast_progress');
    ({ owner } = await insertSender(orm));
  });
  after(async () => orm.close());

  it('counts each broadcast apart: queued = queued + sending, sent = sent + unconfirmed, one unsubscribe per message event', async () => {
    const a = await insertBroadcast(orm, owner, { status: 'sending' });
    const b = await insertBroadcast(orm, owner, { status: 'sending' });
    const statuses = [
      'queued',
      'sending',
      'sent',
      'unconfirmed',
      'delivered',
      'delivered',
      'bounced',
      'complained',
      'suppressed',
      'failed',
      'canceled',
    ];
    const emails = [];
    for (const status of statuses) emails.push(await insertEmail(orm, owner, { broadcast_id: a.id, status, source: 'broadcast' }));
    await insertEmail(orm, owner, { broadcast_id: b.id, status: 'delivered', source: 'broadcast' });
    // A message with no broadcast is no broadcast's.
    await insertEmail(orm, owner, { status: 'delivered' });
    await insertEmailEvent(orm, emails[4], 'unsubscribed', 'to@example.com');
    await insertEmailEvent(orm, emails[5], 'unsubscribed', 'to@example.com');
    await insertEmailEvent(orm, emails[5], 'opened', 'to@example.com');

    const progress = await broadcastProgress(orm, [a.id, b.id]);
    assert.deepEqual(
      { ...progress.get(a.id) },
      {
        broadcast_id: a.id,
        queued: 2,
        sent: 2,
        delivered: 2,
        bounced: 1,
        complained: 1,
        suppressed: 1,
        failed: 1,
        canceled: 1,
        unsubscribed: 2,
      },
    );
    const pb = progress.get(b.id);
    assert.equal(pb?.delivered, 1);
    assert.equal(pb?.queued, 0);
    assert.equal(pb?.unsubscribed, 0);
  });

  it('a broadcast without messages (or no such broadcast) has no entry; no ids, an empty map', async () => {
    const empty = await insertBroadcast(orm, owner);
    const progress = await broadcastProgress(orm, [empty.id, randomUUID()]);
    assert.equal(progress.size, 0);
    assert.equal((await broadcastProgress(orm, [])).size, 0);
  });
});
