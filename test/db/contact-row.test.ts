import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { contactColumns, contactMatch, subscriptionsJson, subscriptionsJsonAfterWrite } from '../../db/sql/contact-row';
import { insertContact, insertOrganization, insertSubscription, insertTopic, ms, openTestDb, sql, type Row } from '../support/db-fixtures';

// Fragments shared by the contact statements (no race of their own); each is run here in a statement built for it.
describe('db/sql/contact-row: the contact shape, its subscriptions (effective, per topic) and how a contact is named', function () {
  let orm: Orm;
  let org: Row;
  let other: Row;
  let contact: Row;
  let alpha: Row;
  let beta: Row;
  let gamma: Row;

  before(async () => {
    orm = await openTestDb('db_contact_row');
    org = await insertOrganization(orm);
    other = await insertOrganization(orm);
    // Created out of slug order: the answer is in slug order.
    gamma = await insertTopic(orm, org.id, { slug: 'gamma', default_opt_in: true });
    alpha = await insertTopic(orm, org.id, { slug: 'alpha', default_opt_in: false });
    beta = await insertTopic(orm, org.id, { slug: 'beta', default_opt_in: true });
    await insertTopic(orm, other.id, { slug: 'aaa-theirs', default_opt_in: true });
    contact = await insertContact(orm, org.id, { first_name: 'Ada', last_name: 'L', properties: { plan: 'pro' } });
    await insertSubscription(orm, contact.id, beta.id, 'unsubscribed', { source: 'link', changed_at: new Date('2030-01-01T00:00:00Z') });
  });
  after(async () => orm.close());

  it("subscriptionsJson: one entry per topic of the organization in slug order, the explicit row's state or the default", async () => {
    const [row] = await sql(orm, `select ${subscriptionsJson('$1::uuid', '$2::uuid')} as subs`, [contact.id, org.id]);
    assert.deepEqual(
      row.subs.map((s: Row) => [s.topic, s.state, s.explicit, s.source]),
      [
        ['alpha', 'unsubscribed', false, null],
        ['beta', 'unsubscribed', true, 'link'],
        ['gamma', 'subscribed', false, null],
      ],
    );
    assert.equal(ms(row.subs[1].changed_at), Date.parse('2030-01-01T00:00:00Z'));
    assert.equal(row.subs[0].changed_at, null);
  });

  it('subscriptionsJson: an organization without topics answers an empty array', async () => {
    const [row] = await sql(orm, `select ${subscriptionsJson('$1::uuid', '$2::uuid')} as subs`, [
      contact.id,
      (await insertOrganization(orm)).id,
    ]);
    assert.deepEqual(row.subs, []);
  });

  it("subscriptionsJsonAfterWrite: the statement's own writes (rows and topics) win over its snapshot, each topic once", async () => {
    const c = await insertContact(orm, org.id);
    await insertSubscription(orm, c.id, alpha.id, 'subscribed', { source: 'old' });
    const [row] = await sql(
      orm,
      `with tw as (
         insert into topics (id, organization_id, slug, name, default_opt_in, created_at)
         values (gen_random_uuid(), $2::uuid, 'delta', 'delta', false, now()) returning id, organization_id, slug, default_opt_in
       ), written as (
         insert into subscriptions as s (contact_id, topic_id, state, source, changed_at)
         values ($1::uuid, $3::uuid, 'unsubscribed', 'new', now())
         on conflict (contact_id, topic_id) do update set state = excluded.state, source = excluded.source
         returning s.contact_id, s.topic_id, s.state, s.source, s.changed_at
       )
       select ${subscriptionsJsonAfterWrite('$1::uuid', '$2::uuid', 'tw')} as subs`,
      [c.id, org.id, alpha.id],
    );
    assert.deepEqual(
      row.subs.map((s: Row) => [s.topic, s.state, s.explicit, s.source]),
      [
        ['alpha', 'unsubscribed', true, 'new'],
        ['beta', 'subscribed', false, null],
        ['delta', 'unsubscribed', false, null],
        ['gamma', 'subscribed', false, null],
      ],
    );
  });

  it('contactMatch: by id or by email, only in the organization', async () => {
    const find = async (orgId: string, id: string | null, email: string | null) =>
      (
        await sql(orm, `select ${contactColumns('x')} from contacts x where ${contactMatch('x', '$1::uuid', '$2', '$3')}`, [
          orgId,
          id,
          email,
        ])
      ).map((r) => r.id);
    assert.deepEqual(await find(org.id, contact.id, null), [contact.id]);
    assert.deepEqual(await find(org.id, null, contact.email), [contact.id]);
    assert.deepEqual(await find(other.id, contact.id, null), []);
    assert.deepEqual(await find(other.id, null, contact.email), []);
    assert.deepEqual(await find(org.id, null, contact.email.toUpperCase()), [], 'the caller lower-cases the address');
  });

  it('contactColumns: the fields of the contact shape, in order', async () => {
    const [row] = await sql(orm, `select ${contactColumns('x')} from contacts x where x.id = $1`, [contact.id]);
    assert.deepEqual(Object.keys(row), ['id', 'email', 'first_name', 'last_name', 'status', 'properties', 'created_at', 'updated_at']);
    assert.deepEqual([row.first_name, row.last_name, row.status, row.properties], ['Ada', 'L', 'subscribed', { plan: 'pro' }]);
  });
});
