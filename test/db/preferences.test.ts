import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { readPreferences } from '../../db/sql/preferences';
import { insertContact, insertOrganization, insertSubscription, insertTopic, openTestDb, type Row } from '../support/db-fixtures';

// A read only (a GET changes nothing): no race of its own.
describe('db/sql/preferences: what the preference page shows one address of an organization', function () {
  let orm: Orm;
  let org: Row;
  let contact: Row;
  let weekly: Row;
  let alerts: Row;

  before(async () => {
    orm = await openTestDb('db_preferences');
    org = await insertOrganization(orm, { name: 'Prefs Org' });
    weekly = await insertTopic(orm, org.id, { name: 'Weekly', default_opt_in: true });
    alerts = await insertTopic(orm, org.id, { name: 'Alerts', default_opt_in: false });
    contact = await insertContact(orm, org.id, { status: 'unsubscribed' });
    await insertSubscription(orm, contact.id, weekly.id, 'unsubscribed');
  });
  after(async () => orm.close());

  it('a contact: its status and every topic of the organization by name with its effective state', async () => {
    const other = await insertOrganization(orm);
    await insertTopic(orm, other.id, { name: 'Aaa theirs' });
    const row = await readPreferences(orm, org.id, contact.email);
    assert.deepEqual(row, {
      organization: 'Prefs Org',
      status: 'unsubscribed',
      topics: [
        { id: alerts.id, name: 'Alerts', state: 'unsubscribed' },
        { id: weekly.id, name: 'Weekly', state: 'unsubscribed' },
      ],
    });
  });

  it('an address that is no contact: status null, every topic at its default', async () => {
    const row = await readPreferences(orm, org.id, 'nobody@example.com');
    assert.equal(row?.status, null);
    assert.deepEqual(
      row?.topics.map((t) => [t.name, t.state]),
      [
        ['Alerts', 'unsubscribed'],
        ['Weekly', 'subscribed'],
      ],
    );
  });

  it("another organization's contact of the same address is not this one's", async () => {
    const other = await insertOrganization(orm);
    const theirs = await insertContact(orm, other.id, { status: 'bounced' });
    const row = await readPreferences(orm, org.id, theirs.email);
    assert.equal(row?.status, null);
    assert.equal(row?.organization, 'Prefs Org');
  });

  it('no row when the organization is gone; an organization without topics shows none', async () => {
    assert.equal(await readPreferences(orm, randomUUID(), contact.email), null);
    const bare = await insertOrganization(orm, { name: 'Bare' });
    assert.deepEqual(await readPreferences(orm, bare.id, 'x@example.com'), { organization: 'Bare', status: null, topics: [] });
  });
});
