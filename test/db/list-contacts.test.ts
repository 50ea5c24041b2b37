import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { listContacts } from '../../db/sql/list-contacts';
import { insertContact, insertOrganization, insertSubscription, insertTopic, openTestDb, type Row } from '../support/db-fixtures';

// A read: no race of its own (keyset pages are stable under inserts, tested below).
describe("db/sql/list-contacts: a page of an organization's contacts, newest first, filtered, walked by keyset", function () {
  let orm: Orm;
  let org: Row;
  let topic: Row;
  /** Newest first. */
  const contacts: Row[] = [];
  const at = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s));

  before(async () => {
    orm = await openTestDb('db_list_contacts');
    org = await insertOrganization(orm);
    topic = await insertTopic(orm, org.id, { slug: 'news', default_opt_in: false });
    const other = await insertOrganization(orm);
    const emails = ['ann@example.com', 'a_b@example.com', 'a%c@example.com', 'axb@example.com', 'bob@example.com'];
    for (let i = 0; i < emails.length; i++) contacts.unshift(await insertContact(orm, org.id, { email: emails[i], created_at: at(i) }));
    // Two contacts created at the same instant: the id breaks the tie.
    contacts.unshift(await insertContact(orm, org.id, { email: 'tie1@example.com', created_at: at(10) }));
    contacts.unshift(await insertContact(orm, org.id, { email: 'tie2@example.com', created_at: at(10) }));
    await insertSubscription(orm, contacts[0].id, topic.id, 'subscribed');
    await insertContact(orm, other.id, { email: 'ann@example.com', created_at: at(20) });
  });
  after(async () => orm.close());

  const emailsOf = (rows: Row[]) => rows.map((r) => r.email);

  it("answers the organization's contacts newest first (id breaks ties), limit + 1 rows, each with its subscriptions", async () => {
    const rows = await listContacts(orm, { organizationId: org.id, conditions: [], limit: 3 });
    assert.deepEqual(emailsOf(rows), emailsOf(contacts.slice(0, 4)));
    assert.deepEqual(
      rows[0].subscriptions.map((s) => [s.topic, s.state, s.explicit]),
      [['news', 'subscribed', true]],
    );
    assert.deepEqual(
      rows[1].subscriptions.map((s) => [s.topic, s.state, s.explicit]),
      [['news', 'unsubscribed', false]],
    );
    const all = await listContacts(orm, { organizationId: org.id, conditions: [], limit: 100 });
    assert.equal(all.length, contacts.length, "another organization's contact is not listed");
  });

  it('walks pages by keyset: each page strictly after the last row of the one before, whatever is inserted meanwhile', async () => {
    const page1 = (await listContacts(orm, { organizationId: org.id, conditions: [], limit: 3 })).slice(0, 3);
    const last = page1[2];
    // A contact created after the walk began does not shift the next page.
    await insertContact(orm, org.id, { email: 'new@example.com', created_at: at(30) });
    const page2 = await listContacts(orm, {
      organizationId: org.id,
      conditions: [],
      after: { createdAt: new Date(last.created_at), id: last.id },
      limit: 3,
    });
    assert.deepEqual(emailsOf(page2), emailsOf(contacts.slice(3, 7)));
    await orm.em.fork().execute("delete from contacts where email = 'new@example.com'");
  });

  it('an email prefix is literal: % and _ in it match themselves only', async () => {
    const prefix = async (p: string) =>
      emailsOf(await listContacts(orm, { organizationId: org.id, conditions: [], emailPrefix: p, limit: 100 })).sort();
    assert.deepEqual(await prefix('a'), ['a%c@example.com', 'a_b@example.com', 'ann@example.com', 'axb@example.com']);
    assert.deepEqual(await prefix('a_'), ['a_b@example.com']);
    assert.deepEqual(await prefix('a%'), ['a%c@example.com']);
    assert.deepEqual(await prefix('bob@'), ['bob@example.com']);
    assert.deepEqual(await prefix('zzz'), []);
  });

  it('conditions narrow the page', async () => {
    const rows = await listContacts(orm, {
      organizationId: org.id,
      conditions: [{ topicId: topic.id, defaultOptIn: false, state: 'subscribed' }],
      limit: 100,
    });
    assert.deepEqual(emailsOf(rows), [contacts[0].email]);
    assert.deepEqual(await listContacts(orm, { organizationId: org.id, conditions: [{ status: 'bounced' }], limit: 100 }), []);
  });
});
