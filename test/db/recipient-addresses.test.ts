import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { recipientAddresses } from '../../db/sql/recipient-addresses';
import { insertEmail, insertRecipient, insertSender, openTestDb } from '../support/db-fixtures';

// A read of one message's recipients: no race. Its rule: that message's, of that organization only.
describe('db/sql/recipient-addresses: the addresses a stored message was accepted for', function () {
  let orm: Orm;
  before(async () => {
    orm = await openTestDb('db_recipient_addresses');
  });
  after(async () => orm.close());

  it('answers every recipient of the message, suppressed ones included, and none of another message', async () => {
    const { owner } = await insertSender(orm);
    const email = await insertEmail(orm, owner);
    const otherEmail = await insertEmail(orm, owner);
    await insertRecipient(orm, email.id, 'a@example.com');
    await insertRecipient(orm, email.id, 'b@example.com', { field: 'cc', state: 'suppressed' });
    await insertRecipient(orm, otherEmail.id, 'c@example.com');
    assert.deepEqual((await recipientAddresses(orm, email.id, owner.organizationId)).sort(), ['a@example.com', 'b@example.com']);
  });

  it('answers nothing when the message belongs to another organization, or does not exist', async () => {
    const mine = await insertSender(orm);
    const theirs = await insertSender(orm);
    const email = await insertEmail(orm, theirs.owner);
    await insertRecipient(orm, email.id, 'a@example.com');
    assert.deepEqual(await recipientAddresses(orm, email.id, mine.owner.organizationId), []);
    assert.deepEqual(await recipientAddresses(orm, mine.owner.domainId, mine.owner.organizationId), []);
  });
});
