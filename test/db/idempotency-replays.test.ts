import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { findIdempotencyReplays } from '../../db/sql/idempotency-replays';
import { insertEmail, insertSender, ms, openTestDb, type EmailOwner } from '../support/db-fixtures';

// A read: the race on a key is settled by the store's unique index (emails_org_idempotency_key_uq), in store-emails.ts.
describe("db/sql/idempotency-replays: the messages already holding some of an organization's idempotency keys", function () {
  let orm: Orm;
  let owner: EmailOwner;
  let stranger: EmailOwner;

  before(async () => {
    orm = await openTestDb('db_idempotency_replays');
    ({ owner } = await insertSender(orm));
    ({ owner: stranger } = await insertSender(orm));
  });
  after(async () => orm.close());

  it("finds the organization's messages by key, started or not; keys held by no message (or by another organization's) are not answered", async () => {
    const started = await insertEmail(orm, owner, { idempotency_key: 'k-1', enqueued_at: new Date('2030-01-01T00:00:00Z') });
    const stored = await insertEmail(orm, owner, { idempotency_key: 'k-2' });
    await insertEmail(orm, stranger, { idempotency_key: 'k-3' });
    await insertEmail(orm, owner);
    const rows = await findIdempotencyReplays(orm, owner.organizationId, ['k-1', 'k-2', 'k-3', 'k-4']);
    const byKey = Object.fromEntries(rows.map((r) => [r.idempotency_key, r]));
    assert.deepEqual(Object.keys(byKey).sort(), ['k-1', 'k-2']);
    assert.equal(byKey['k-1'].id, started.id);
    assert.equal(ms(byKey['k-1'].enqueued_at), Date.parse('2030-01-01T00:00:00Z'));
    assert.equal(byKey['k-2'].id, stored.id);
    assert.equal(byKey['k-2'].enqueued_at, null);
  });

  it('a key is matched exactly (no pattern, case kept); no keys, no rows', async () => {
    await insertEmail(orm, owner, { idempotency_key: 'Order-%' });
    assert.deepEqual(await findIdempotencyReplays(orm, owner.organizationId, ['order-%', 'Order-']), []);
    assert.equal((await findIdempotencyReplays(orm, owner.organizationId, ['Order-%'])).length, 1);
    assert.deepEqual(await findIdempotencyReplays(orm, owner.organizationId, []), []);
  });
});
