import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import { unsubscribe } from '../../db/sql/unsubscribe';
import {
  insertContact,
  insertEmail,
  insertSender,
  insertSubscription,
  insertTopic,
  ms,
  openTestDb,
  sql,
  unique,
  type Row,
} from '../support/db-fixtures';
import { releasedTogether, values } from '../support/db-fixtures-rz';

describe('db/sql/unsubscribe: the one-click unsubscribe link', function () {
  let orm: Orm;
  let sender: Awaited<ReturnType<typeof insertSender>>;
  let other: Awaited<ReturnType<typeof insertSender>>;
  let org: Row;
  const now = new Date('2031-03-04T05:06:07.000Z');

  before(async () => {
    orm = await openTestDb('db_unsubscribe');
    sender = await insertSender(orm, { organization: { name: 'Unsub Org' } });
    other = await insertSender(orm);
    org = sender.organization;
  });
  after(async () => orm.close());

  const click = (p: { emailId: string; topicId: string | null; address: string; org?: string; newContactId?: string }) =>
    unsubscribe(orm, {
      organizationId: p.org ?? org.id,
      emailId: p.emailId,
      topicId: p.topicId,
      address: p.address,
      now,
      newContactId: p.newContactId ?? uuidv7(),
    });
  const contactOf = async (orgId: string, address: string) =>
    sql(orm, 'select id, status, updated_at from contacts where organization_id = $1 and email = $2', [orgId, address]);
  const subscriptionsOf = (contactId: string) =>
    sql(orm, 'select topic_id, state, source, changed_at from subscriptions where contact_id = $1', [contactId]);
  const unsubscribedEvents = (emailId: string) =>
    sql(orm, `select recipient, detail, at from email_events where email_id = $1 and type = 'unsubscribed'`, [emailId]);
  const triggers = (contactId: string) => sql(orm, 'select type from automation_triggers where contact_id = $1', [contactId]);

  it('with a topic: the contact (created subscribed) leaves that topic only, and the message gets the event', async () => {
    const topic = await insertTopic(orm, org.id, { slug: unique('news'), name: 'News' });
    const email = await insertEmail(orm, sender.owner);
    const address = `${unique('t')}@example.com`;
    const newContactId = uuidv7();
    const row = await click({ emailId: email.id, topicId: topic.id, address, newContactId });
    assert.deepEqual(row, { topic_slug: topic.slug, topic_name: 'News', organization: 'Unsub Org' });
    const [c] = await contactOf(org.id, address);
    assert.equal(c.id, newContactId);
    assert.equal(c.status, 'subscribed');
    assert.deepEqual(
      (await subscriptionsOf(c.id)).map((s) => ({ ...s, changed_at: ms(s.changed_at) })),
      [{ topic_id: topic.id, state: 'unsubscribed', source: 'unsubscribe_link', changed_at: now.getTime() }],
    );
    assert.deepEqual(
      (await unsubscribedEvents(email.id)).map((e) => ({ ...e, at: ms(e.at) })),
      [{ recipient: address, detail: topic.slug, at: now.getTime() }],
    );
    assert.deepEqual(await triggers(c.id), [], 'a contact created to hold an opt-out starts no automation');
  });

  it('with a topic: an explicit subscribed row becomes unsubscribed; one already unsubscribed keeps its time', async () => {
    const t1 = await insertTopic(orm, org.id);
    const t2 = await insertTopic(orm, org.id);
    const c = await insertContact(orm, org.id);
    const earlier = new Date('2030-01-01T00:00:00.000Z');
    await insertSubscription(orm, c.id, t1.id, 'subscribed', { changed_at: earlier });
    await insertSubscription(orm, c.id, t2.id, 'unsubscribed', { changed_at: earlier, source: 'api' });
    const email = await insertEmail(orm, sender.owner);
    await click({ emailId: email.id, topicId: t1.id, address: c.email });
    await click({ emailId: email.id, topicId: t2.id, address: c.email });
    const rows = new Map((await subscriptionsOf(c.id)).map((s) => [s.topic_id, s]));
    assert.deepEqual(
      [rows.get(t1.id)!.state, rows.get(t1.id)!.source, ms(rows.get(t1.id)!.changed_at)],
      ['unsubscribed', 'unsubscribe_link', now.getTime()],
    );
    assert.deepEqual(
      [rows.get(t2.id)!.state, rows.get(t2.id)!.source, ms(rows.get(t2.id)!.changed_at)],
      ['unsubscribed', 'api', earlier.getTime()],
    );
    assert.equal((await contactOf(org.id, c.email))[0].status, 'subscribed', 'a topic opt-out leaves the contact subscribed');
  });

  it('without a topic: the contact becomes unsubscribed (created so when absent); a bounced one stays bounced', async () => {
    const email = await insertEmail(orm, sender.owner);
    const fresh = `${unique('n')}@example.com`;
    const row = await click({ emailId: email.id, topicId: null, address: fresh });
    assert.deepEqual(row, { topic_slug: null, topic_name: null, organization: 'Unsub Org' });
    assert.equal((await contactOf(org.id, fresh))[0].status, 'unsubscribed');
    const subscribed = await insertContact(orm, org.id);
    await click({ emailId: email.id, topicId: null, address: subscribed.email });
    const [s] = await contactOf(org.id, subscribed.email);
    assert.deepEqual([s.status, ms(s.updated_at)], ['unsubscribed', now.getTime()]);
    const bounced = await insertContact(orm, org.id, { status: 'bounced' });
    await click({ emailId: email.id, topicId: null, address: bounced.email });
    const [b] = await contactOf(org.id, bounced.email);
    assert.deepEqual([b.status, ms(b.updated_at)], ['bounced', ms(bounced.updated_at)]);
  });

  it('a topic deleted since, or another organization’s topic, is no topic: the wider opt-out applies', async () => {
    const theirs = await insertTopic(orm, other.organization.id);
    const email = await insertEmail(orm, sender.owner);
    const a = `${unique('g')}@example.com`;
    const b = `${unique('h')}@example.com`;
    assert.equal((await click({ emailId: email.id, topicId: uuidv7(), address: a })).topic_slug, null);
    assert.equal((await click({ emailId: email.id, topicId: theirs.id, address: b })).topic_slug, null);
    assert.equal((await contactOf(org.id, a))[0].status, 'unsubscribed');
    const [cb] = await contactOf(org.id, b);
    assert.equal(cb.status, 'unsubscribed');
    assert.deepEqual(await subscriptionsOf(cb.id), [], 'no row for another organization’s topic');
  });

  it('the event is written once per message and recipient; a message gone still changes the contact', async () => {
    const email = await insertEmail(orm, sender.owner);
    const address = `${unique('o')}@example.com`;
    await click({ emailId: email.id, topicId: null, address });
    await click({ emailId: email.id, topicId: null, address });
    assert.equal((await unsubscribedEvents(email.id)).length, 1);
    const gone = `${unique('gone')}@example.com`;
    await click({ emailId: uuidv7(), topicId: null, address: gone });
    assert.equal((await contactOf(org.id, gone))[0].status, 'unsubscribed');
  });

  it('another organization’s message gets no event; an unknown organization writes nothing', async () => {
    const theirEmail = await insertEmail(orm, other.owner);
    const address = `${unique('x')}@example.com`;
    await click({ emailId: theirEmail.id, topicId: null, address });
    assert.deepEqual(await unsubscribedEvents(theirEmail.id), []);
    const nobody = uuidv7();
    const row = await click({ emailId: theirEmail.id, topicId: null, address, org: nobody });
    assert.deepEqual(row, { topic_slug: null, topic_name: null, organization: null });
    assert.deepEqual(await contactOf(nobody, address), []);
    assert.deepEqual(await contactOf(other.organization.id, address), [], 'nothing written in the message’s organization either');
  });

  /**
   * The race: a recipient clicks twice, or the mail client prefetches while the person clicks. The
   * clicks queue behind a transaction holding the contact's key (then rolled back), so they all
   * meet on creating the contact: one contact, one topic row, one event.
   */
  it('race: concurrent clicks for a new contact create one contact, one topic row and one event', async () => {
    const topic = await insertTopic(orm, org.id);
    const email = await insertEmail(orm, sender.owner);
    const address = `${unique('race')}@example.com`;
    const rows = values(
      await releasedTogether(
        orm,
        [
          [
            `insert into contacts (id, organization_id, email, status, properties, created_at, updated_at) values ($1, $2, $3, 'subscribed', '{}', now(), now())`,
            [uuidv7(), org.id, address],
          ],
        ],
        Array.from({ length: 6 }, () => () => click({ emailId: email.id, topicId: topic.id, address })),
        'rollback',
      ),
    );
    assert.ok(rows.every((r) => r.topic_slug === topic.slug));
    const contacts = await contactOf(org.id, address);
    assert.equal(contacts.length, 1);
    assert.equal((await subscriptionsOf(contacts[0].id)).length, 1);
    assert.equal((await unsubscribedEvents(email.id)).length, 1);
  });

  it('race: concurrent clicks on an existing contact write the event once', async () => {
    const c = await insertContact(orm, org.id);
    const email = await insertEmail(orm, sender.owner);
    values(
      await releasedTogether(
        orm,
        [[`select 1 from contacts where id = $1 for update`, [c.id]]],
        Array.from({ length: 6 }, () => () => click({ emailId: email.id, topicId: null, address: c.email })),
      ),
    );
    assert.equal((await unsubscribedEvents(email.id)).length, 1);
    assert.equal((await contactOf(org.id, c.email))[0].status, 'unsubscribed');
  });
});
