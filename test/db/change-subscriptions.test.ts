import { readContact } from '../../db/sql/read-contact';
import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { changeSubscriptions } from '../../db/sql/change-subscriptions';
import {
  concurrently,
  insertContact,
  insertOrganization,
  insertSubscription,
  insertTopic,
  lockWaiters,
  ms,
  openTestDb,
  openTransaction,
  sql,
  type Row,
} from '../support/db-fixtures';

describe("db/sql/change-subscriptions: a contact's subscription changes, all or nothing, in its organization", function () {
  let orm: Orm;
  let org: Row;
  let news: Row;
  let tips: Row;
  const at = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s));

  before(async () => {
    orm = await openTestDb('db_change_subscriptions');
    org = await insertOrganization(orm);
    news = await insertTopic(orm, org.id, { slug: 'news', default_opt_in: false });
    tips = await insertTopic(orm, org.id, { slug: 'tips', default_opt_in: true });
  });
  after(async () => orm.close());

  const rowsOf = (contactId: string) =>
    sql(orm, 'select topic_id, state, source, changed_at from subscriptions where contact_id = $1 order by topic_id', [contactId]);
  const triggersOf = (contactId: string) =>
    sql(orm, 'select type, topic_id, organization_id from automation_triggers where contact_id = $1 order by id', [contactId]);

  it('by id: writes the explicit rows, answers the contact with every topic in slug order, records a trigger per subscribe', async () => {
    const c = await insertContact(orm, org.id);
    const row = await changeSubscriptions(
      orm,
      org.id,
      { id: c.id, email: null },
      [
        { slug: 'news', state: 'subscribed' },
        { slug: 'tips', state: 'unsubscribed' },
      ],
      at(1),
    );
    assert.equal(row.contact_exists, true);
    assert.deepEqual(row.unknown_topics, []);
    assert.equal(row.contact?.id, c.id);
    assert.equal(ms(row.contact!.updated_at), at(1).getTime());
    assert.deepEqual(
      row.contact!.subscriptions.map((s) => [s.topic, s.state, s.explicit, s.source]),
      [
        ['news', 'subscribed', true, 'api'],
        ['tips', 'unsubscribed', true, 'api'],
      ],
    );
    const rows = await rowsOf(c.id);
    assert.equal(rows.length, 2);
    assert.ok(rows.every((r) => r.source === 'api' && ms(r.changed_at) === at(1).getTime()));
    assert.deepEqual(await triggersOf(c.id), [{ type: 'topic.subscribed', topic_id: news.id, organization_id: org.id }]);
  });

  it('by email; a state unchanged is not written again (changed_at kept, no trigger)', async () => {
    const c = await insertContact(orm, org.id);
    await insertSubscription(orm, c.id, news.id, 'subscribed', { source: 'import', changed_at: at(0) });
    const row = await changeSubscriptions(orm, org.id, { id: null, email: c.email }, [{ slug: 'news', state: 'subscribed' }], at(5));
    assert.equal(row.contact?.id, c.id);
    const [news1] = row.contact!.subscriptions;
    assert.deepEqual([news1.topic, news1.state, news1.source], ['news', 'subscribed', 'import']);
    const rows = await rowsOf(c.id);
    assert.equal(ms(rows[0].changed_at), at(0).getTime());
    assert.equal(rows[0].source, 'import');
    assert.deepEqual(await triggersOf(c.id), []);
  });

  it('an unknown slug (or a topic of another organization): nothing is written, the unknown slugs answered', async () => {
    const c = await insertContact(orm, org.id);
    const other = await insertOrganization(orm);
    await insertTopic(orm, other.id, { slug: 'theirs' });
    const row = await changeSubscriptions(
      orm,
      org.id,
      { id: c.id, email: null },
      [
        { slug: 'news', state: 'subscribed' },
        { slug: 'zzz', state: 'subscribed' },
        { slug: 'theirs', state: 'subscribed' },
      ],
      at(1),
    );
    assert.deepEqual(row, { contact_exists: true, unknown_topics: ['theirs', 'zzz'], contact: null, unwritten: false });
    assert.deepEqual(await rowsOf(c.id), []);
    assert.deepEqual(await triggersOf(c.id), []);
    const [fresh] = await sql(orm, 'select updated_at from contacts where id = $1', [c.id]);
    assert.equal(ms(fresh.updated_at), ms(c.updated_at), 'the contact is not touched');
  });

  it("another organization's contact is neither found nor changed, by id or by email", async () => {
    const other = await insertOrganization(orm);
    await insertTopic(orm, other.id, { slug: 'news' });
    const theirs = await insertContact(orm, other.id);
    for (const ref of [
      { id: theirs.id, email: null },
      { id: null, email: theirs.email },
    ]) {
      const row = await changeSubscriptions(orm, org.id, ref, [{ slug: 'news', state: 'subscribed' }], at(1));
      assert.deepEqual(row, { contact_exists: false, unknown_topics: [], contact: null, unwritten: false });
    }
    assert.deepEqual(await rowsOf(theirs.id), []);
  });

  it('a subscribe after leaving is a change: written, with a new trigger', async () => {
    const c = await insertContact(orm, org.id);
    await insertSubscription(orm, c.id, news.id, 'unsubscribed', { changed_at: at(0) });
    await changeSubscriptions(orm, org.id, { id: c.id, email: null }, [{ slug: 'news', state: 'subscribed' }], at(2));
    const [r] = await rowsOf(c.id);
    assert.deepEqual([r.state, ms(r.changed_at)], ['subscribed', at(2).getTime()]);
    assert.equal((await triggersOf(c.id)).length, 1);
  });

  it('race: the same subscribe sent at once several times writes once and records one trigger', async () => {
    const c = await insertContact(orm, org.id);
    const rows = await concurrently(6, (i) =>
      changeSubscriptions(orm, org.id, { id: c.id, email: null }, [{ slug: 'news', state: 'subscribed' }], at(10 + i)),
    );
    assert.ok(rows.every((r) => r.contact !== null));
    assert.equal((await rowsOf(c.id)).length, 1);
    assert.equal((await triggersOf(c.id)).length, 1);
  });

  it('race: a change blocked behind the same change committed meanwhile answers the state the contact has', async () => {
    const c = await insertContact(orm, org.id);
    const first = await openTransaction(orm);
    // What the same statement of another request does first: lock the contact, write the row.
    await first.query('update contacts set updated_at = $1 where id = $2', [at(1), c.id]);
    await first.query(
      `insert into subscriptions (contact_id, topic_id, state, source, changed_at) values ($1, $2, 'subscribed', 'api', $3)`,
      [c.id, news.id, at(1)],
    );
    const second = changeSubscriptions(orm, org.id, { id: c.id, email: null }, [{ slug: 'news', state: 'subscribed' }], at(2));
    await lockWaiters(orm, 1);
    await first.commit();
    const row = await second;
    assert.equal((await rowsOf(c.id))[0].state, 'subscribed');
    // The statement's own read is its snapshot's: it says so, and its caller reads the contact again.
    assert.equal(row.unwritten, true);
    const fresh = await readContact(orm, org.id, { id: c.id, email: null });
    const view = fresh?.subscriptions.find((s) => s.topic === 'news');
    assert.deepEqual([view?.state, view?.explicit], ['subscribed', true]);
  });

  it('a change that writes every row it names does not ask for a second read', async () => {
    const c = await insertContact(orm, org.id);
    const row = await changeSubscriptions(orm, org.id, { id: c.id, email: null }, [{ slug: 'news', state: 'subscribed' }], at(1));
    assert.equal(row.unwritten, false);
    const again = await changeSubscriptions(orm, org.id, { id: c.id, email: null }, [{ slug: 'news', state: 'subscribed' }], at(2));
    assert.equal(again.unwritten, true);
  });

  it('race: a topic deleted while a change names it: all of the change is rolled back, or all of it is written', async () => {
    for (let round = 0; round < 5; round++) {
      const c = await insertContact(orm, org.id);
      const doomed = await insertTopic(orm, org.id);
      const [change] = await Promise.allSettled([
        changeSubscriptions(
          orm,
          org.id,
          { id: c.id, email: null },
          [
            { slug: 'news', state: 'subscribed' },
            { slug: doomed.slug, state: 'subscribed' },
          ],
          at(1),
        ),
        sql(orm, 'delete from topics where id = $1', [doomed.id]),
      ]);
      const rows = await rowsOf(c.id);
      if (change.status === 'fulfilled' && change.value.contact) {
        // Written before the delete: the delete's cascade took that topic's row.
        assert.deepEqual(
          rows.map((r) => r.topic_id),
          [news.id],
        );
      } else {
        assert.deepEqual(rows, [], 'nothing written');
        assert.deepEqual(await triggersOf(c.id), []);
      }
    }
  });
});
