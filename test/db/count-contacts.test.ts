import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { countContacts } from '../../db/sql/count-contacts';
import { insertContact, insertOrganization, insertSubscription, insertTopic, openTestDb, type Row } from '../support/db-fixtures';

// A read: no race of its own.
describe("db/sql/count-contacts: how many of an organization's contacts meet every condition", function () {
  let orm: Orm;
  let org: Row;
  let topic: Row;

  before(async () => {
    orm = await openTestDb('db_count_contacts');
    org = await insertOrganization(orm);
    const other = await insertOrganization(orm);
    topic = await insertTopic(orm, org.id, { default_opt_in: false });
    const a = await insertContact(orm, org.id);
    await insertContact(orm, org.id);
    const c = await insertContact(orm, org.id, { status: 'unsubscribed' });
    await insertContact(orm, org.id, { status: 'bounced' });
    await insertSubscription(orm, a.id, topic.id, 'subscribed');
    await insertSubscription(orm, c.id, topic.id, 'subscribed');
    // Another organization's contacts count for it only.
    for (let i = 0; i < 3; i++) await insertContact(orm, other.id);
  });
  after(async () => orm.close());

  it('no condition: every contact of the organization', async () => {
    assert.equal(await countContacts(orm, org.id, []), 4);
  });

  it('a status condition, a topic condition, both', async () => {
    assert.equal(await countContacts(orm, org.id, [{ status: 'subscribed' }]), 2);
    assert.equal(await countContacts(orm, org.id, [{ topicId: topic.id, defaultOptIn: false, state: 'subscribed' }]), 2);
    assert.equal(await countContacts(orm, org.id, [{ topicId: topic.id, defaultOptIn: false, state: 'unsubscribed' }]), 2);
    assert.equal(
      await countContacts(orm, org.id, [{ status: 'subscribed' }, { topicId: topic.id, defaultOptIn: false, state: 'subscribed' }]),
      1,
    );
  });

  it('a topic that is gone counts nobody', async () => {
    assert.equal(await countContacts(orm, org.id, [{ topicId: null, defaultOptIn: true, state: 'subscribed' }]), 0);
  });
});
