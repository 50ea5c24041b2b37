import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { readContact } from '../../db/sql/read-contact';
import {
  insertContact,
  insertOrganization,
  insertSubscription,
  insertTopic,
  ms,
  openTestDb,
  unique,
  type Row,
} from '../support/db-fixtures';

// A read: no race. Its rule: the contact of the organization (by id or email) with one
// subscription entry per topic of that organization, explicit or by the topic's default.
describe('db/sql/read-contact: a contact of the organization with its subscriptions', function () {
  let orm: Orm;
  let org: Row;
  let other: Row;

  before(async () => {
    orm = await openTestDb('db_read_contact');
    org = await insertOrganization(orm);
    other = await insertOrganization(orm);
  });
  after(async () => orm.close());

  it('finds the contact by id and by email, with its columns', async () => {
    const c = await insertContact(orm, org.id, { first_name: 'Ada', last_name: null, properties: { plan: 'pro', n: 2 } });
    const byId = await readContact(orm, org.id, { id: c.id, email: null });
    const byEmail = await readContact(orm, org.id, { id: null, email: c.email });
    assert.ok(byId && byEmail);
    assert.equal(byId.id, c.id);
    assert.equal(byEmail.id, c.id);
    assert.equal(byId.email, c.email);
    assert.equal(byId.first_name, 'Ada');
    assert.equal(byId.last_name, null);
    assert.equal(byId.status, 'subscribed');
    assert.deepEqual(byId.properties, { plan: 'pro', n: 2 });
    assert.equal(ms(byId.created_at), ms(c.created_at));
  });

  it('never sees a contact of another organization, by id or by email', async () => {
    const theirs = await insertContact(orm, other.id);
    assert.equal(await readContact(orm, org.id, { id: theirs.id, email: null }), null);
    assert.equal(await readContact(orm, org.id, { id: null, email: theirs.email }), null);
    assert.equal(await readContact(orm, org.id, { id: null, email: `${unique('none')}@example.com` }), null);
  });

  it('the same address in two organizations: each reads its own', async () => {
    const email = `${unique('shared')}@example.com`;
    const mine = await insertContact(orm, org.id, { email });
    const theirs = await insertContact(orm, other.id, { email });
    assert.equal((await readContact(orm, org.id, { id: null, email }))?.id, mine.id);
    assert.equal((await readContact(orm, other.id, { id: null, email }))?.id, theirs.id);
  });

  it('lists one entry per topic of its organization in slug order: the explicit row, else the topic default', async () => {
    const o = await insertOrganization(orm);
    const c = await insertContact(orm, o.id);
    const news = await insertTopic(orm, o.id, { slug: 'b-news', default_opt_in: true });
    const promo = await insertTopic(orm, o.id, { slug: 'a-promo', default_opt_in: true });
    await insertTopic(orm, o.id, { slug: 'c-digest', default_opt_in: false });
    await insertTopic(orm, other.id, { slug: 'a-other-org', default_opt_in: true });
    const at = new Date('2031-02-03T04:05:06.000Z');
    await insertSubscription(orm, c.id, promo.id, 'unsubscribed', { source: 'unsubscribe_link', changed_at: at });
    // Another contact's row for the same topic does not leak into this one's view.
    const c2 = await insertContact(orm, o.id);
    await insertSubscription(orm, c2.id, news.id, 'unsubscribed');
    const row = await readContact(orm, o.id, { id: c.id, email: null });
    assert.ok(row);
    assert.deepEqual(
      row.subscriptions.map((s) => ({ ...s, changed_at: ms(s.changed_at) })),
      [
        { topic: 'a-promo', state: 'unsubscribed', explicit: true, changed_at: at.getTime(), source: 'unsubscribe_link' },
        { topic: 'b-news', state: 'subscribed', explicit: false, changed_at: null, source: null },
        { topic: 'c-digest', state: 'unsubscribed', explicit: false, changed_at: null, source: null },
      ],
    );
  });

  it('an organization without topics: an empty list', async () => {
    const o = await insertOrganization(orm);
    const c = await insertContact(orm, o.id);
    assert.deepEqual((await readContact(orm, o.id, { id: c.id, email: null }))?.subscriptions, []);
  });
});
