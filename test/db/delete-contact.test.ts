import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { deleteContact } from '../../db/sql/delete-contact';
import {
  concurrently,
  insertContact,
  insertOrganization,
  insertSubscription,
  insertSuppression,
  insertTopic,
  openTestDb,
  sql,
  type Row,
} from '../support/db-fixtures';

describe('db/sql/delete-contact: a contact of the organization is deleted once, answered as it was', function () {
  let orm: Orm;
  let org: Row;
  let topic: Row;

  before(async () => {
    orm = await openTestDb('db_delete_contact');
    org = await insertOrganization(orm);
    topic = await insertTopic(orm, org.id, { slug: 'news', default_opt_in: false });
  });
  after(async () => orm.close());

  const exists = async (id: string) => (await sql(orm, 'select 1 from contacts where id = $1', [id])).length === 1;

  it('by id: deleted with its subscription rows; answered with its subscriptions as they were; its suppression stays', async () => {
    const c = await insertContact(orm, org.id, { first_name: 'Ada' });
    await insertSubscription(orm, c.id, topic.id, 'subscribed');
    await insertSuppression(orm, org.id, c.email);
    const row = await deleteContact(orm.em.fork(), org.id, { id: c.id, email: null });
    assert.equal(row?.id, c.id);
    assert.equal(row?.first_name, 'Ada');
    assert.deepEqual(
      row?.subscriptions.map((s) => [s.topic, s.state, s.explicit]),
      [['news', 'subscribed', true]],
    );
    assert.equal(await exists(c.id), false);
    assert.deepEqual(await sql(orm, 'select 1 from subscriptions where contact_id = $1', [c.id]), []);
    assert.equal((await sql(orm, 'select 1 from suppressions where organization_id = $1 and email = $2', [org.id, c.email])).length, 1);
  });

  it('by email; a second delete finds nothing', async () => {
    const c = await insertContact(orm, org.id);
    assert.equal((await deleteContact(orm.em.fork(), org.id, { id: null, email: c.email }))?.id, c.id);
    assert.equal(await deleteContact(orm.em.fork(), org.id, { id: null, email: c.email }), null);
  });

  it("another organization's contact is not deleted, by id or by email (the same address in both)", async () => {
    const other = await insertOrganization(orm);
    const theirs = await insertContact(orm, other.id, { email: 'shared@example.com' });
    const mine = await insertContact(orm, org.id, { email: 'shared@example.com' });
    assert.equal(await deleteContact(orm.em.fork(), org.id, { id: theirs.id, email: null }), null);
    assert.equal((await deleteContact(orm.em.fork(), org.id, { id: null, email: 'shared@example.com' }))?.id, mine.id);
    assert.equal(await exists(theirs.id), true);
  });

  it("runs in the caller's transaction: rolled back with it", async () => {
    const c = await insertContact(orm, org.id);
    await assert.rejects(
      orm.em.fork().transactional(async (em) => {
        assert.equal((await deleteContact(em, org.id, { id: c.id, email: null }))?.id, c.id);
        throw new Error('audit failed');
      }),
      /audit failed/,
    );
    assert.equal(await exists(c.id), true);
  });

  it('race: of concurrent deletes of one contact, exactly one answers it', async () => {
    const c = await insertContact(orm, org.id);
    const rows = await concurrently(6, () => deleteContact(orm.em.fork(), org.id, { id: c.id, email: null }));
    assert.equal(rows.filter((r) => r !== null).length, 1);
    assert.equal(await exists(c.id), false);
  });
});
