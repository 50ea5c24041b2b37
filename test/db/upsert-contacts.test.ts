import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import { upsertContacts, type UpsertContactRow, type UpsertRequest } from '../../db/sql/upsert-contacts';
import {
  insertContact,
  insertDomain,
  insertKey,
  insertOrganization,
  insertSubscription,
  insertTopic,
  ms,
  openTestDb,
  sql,
  unique,
  type KeyRow,
  type Row,
} from '../support/db-fixtures';
import { rateWindow, releasedTogether, values } from '../support/db-fixtures-rz';

describe('db/sql/upsert-contacts: contact upserts authenticated, charged and written in one statement', function () {
  let orm: Orm;
  let org: Row;
  let key: KeyRow;
  const now = new Date('2031-02-02T02:02:02.000Z');
  const later = new Date('2031-02-03T02:02:02.000Z');

  before(async () => {
    orm = await openTestDb('db_upsert_contacts');
    org = await insertOrganization(orm);
    key = await insertKey(orm, org.id, { rate_limit: 1000 });
  });
  after(async () => orm.close());

  const request = (email: string, over: Partial<UpsertRequest> = {}, k: KeyRow = key): UpsertRequest => ({
    tokenHash: k.token_hash,
    newId: uuidv7(),
    email,
    set: {},
    remove: [],
    topics: [],
    ...over,
  });
  const upsert = async (r: UpsertRequest, at = now): Promise<UpsertContactRow> => (await upsertContacts(orm, [r], at))[0];
  const contact = async (orgId: string, email: string) =>
    (await sql(orm, 'select * from contacts where organization_id = $1 and email = $2', [orgId, email]))[0];
  const triggers = (contactId: string) =>
    sql(orm, 'select type, topic_id from automation_triggers where contact_id = $1 order by id', [contactId]);
  const email = () => `${unique('c')}@example.com`;

  it('creates a contact (subscribed by default) and records its contact.created trigger', async () => {
    const address = email();
    const r = await upsert(request(address, { firstName: 'Ada', set: { plan: 'pro' } }));
    assert.deepEqual(
      { ...r, created_at: ms(r.created_at), updated_at: ms(r.updated_at) },
      {
        req: 0,
        known: true,
        admitted: true,
        mode: 'live',
        rate_limit: 1000,
        id: r.id,
        email: address,
        first_name: 'Ada',
        last_name: null,
        status: 'subscribed',
        properties: { plan: 'pro' },
        created_at: now.getTime(),
        updated_at: now.getTime(),
        created: true,
        topics_applied: 0,
        subscriptions: [],
      },
    );
    assert.deepEqual(await triggers(r.id!), [{ type: 'contact.created', topic_id: null }]);
  });

  it('updates an existing contact in place: properties merged (null-set keys removed), names only when given', async () => {
    const c = await insertContact(orm, org.id, { first_name: 'Old', last_name: 'Name', properties: { a: 1, b: 2, keep: true } });
    const r = await upsert(request(c.email, { lastName: null, status: 'unsubscribed', set: { a: 10, c: 'x' }, remove: ['b'] }), later);
    assert.equal(r.created, false);
    assert.equal(r.id, c.id);
    const row = await contact(org.id, c.email);
    assert.deepEqual(
      [row.first_name, row.last_name, row.status, row.properties, ms(row.updated_at), ms(row.created_at)],
      ['Old', null, 'unsubscribed', { a: 10, keep: true, c: 'x' }, later.getTime(), ms(c.created_at)],
    );
    assert.deepEqual(await triggers(c.id), [], 'an update is no contact.created');
  });

  it('topics: missing ones created by slug (opt-in), subscribed explicitly; only a real change fires topic.subscribed', async () => {
    const o = await insertOrganization(orm);
    const k = await insertKey(orm, o.id);
    const existing = await insertTopic(orm, o.id, { slug: 'a-existing', default_opt_in: false });
    const c = await insertContact(orm, o.id);
    await insertSubscription(orm, c.id, existing.id, 'unsubscribed');
    const newTopicId = uuidv7();
    const r = await upsert(
      request(
        c.email,
        {
          topics: [
            { id: uuidv7(), slug: 'a-existing' },
            { id: newTopicId, slug: 'b-new' },
          ],
        },
        k,
      ),
    );
    assert.equal(r.topics_applied, 2);
    const [created] = await sql(orm, `select id, name, default_opt_in from topics where organization_id = $1 and slug = 'b-new'`, [o.id]);
    assert.deepEqual(created, { id: newTopicId, name: 'b-new', default_opt_in: true });
    assert.deepEqual(
      r.subscriptions?.map((s) => [s.topic, s.state, s.explicit, s.source]),
      [
        ['a-existing', 'subscribed', true, 'api'],
        ['b-new', 'subscribed', true, 'api'],
      ],
    );
    assert.deepEqual(
      (await triggers(c.id)).map((t) => [t.type, t.topic_id]).sort(),
      [
        ['topic.subscribed', existing.id],
        ['topic.subscribed', newTopicId],
      ].sort(),
    );
    const again = await upsert(request(c.email, { topics: [{ id: uuidv7(), slug: 'b-new' }] }, k));
    assert.equal(again.topics_applied, 1);
    assert.equal((await triggers(c.id)).length, 2, 'already subscribed: nothing fires');
  });

  it('a domain-restricted key creates the contact without a contact.created trigger', async () => {
    const d = await insertDomain(orm, org.id);
    const restricted = await insertKey(orm, org.id, { domain_ids: [d.id] });
    const r = await upsert(request(email(), {}, restricted));
    assert.equal(r.created, true);
    assert.deepEqual(await triggers(r.id!), []);
  });

  it('a test key is answered but writes nothing; an unknown token is not known', async () => {
    const test = await insertKey(orm, org.id, { mode: 'test' });
    const address = email();
    const r = await upsert(request(address, {}, test));
    assert.deepEqual([r.known, r.admitted, r.mode, r.id, r.created], [true, true, 'test', null, null]);
    assert.equal(await contact(org.id, address), undefined);
    const u = await upsert(request(address, {}, { token_hash: 'b'.repeat(64) } as KeyRow));
    assert.deepEqual([u.known, u.admitted, u.id], [false, false, null]);
  });

  it('requests past the key’s cap are refused in order and write nothing', async () => {
    const capped = await insertKey(orm, org.id, { rate_limit: 2 });
    const addresses = [email(), email(), email()];
    const rows = await upsertContacts(
      orm,
      addresses.map((a) => request(a, {}, capped)),
      now,
    );
    assert.deepEqual(
      rows.map((r) => [r.req, r.admitted, r.created]),
      [
        [0, true, true],
        [1, true, true],
        [2, false, null],
      ],
    );
    assert.equal(await contact(org.id, addresses[2]), undefined);
    assert.equal((await rateWindow(orm, capped.id))?.used, 3);
  });

  it('writes in the key’s organization only: the same address elsewhere is another contact', async () => {
    const other = await insertOrganization(orm);
    const otherKey = await insertKey(orm, other.id);
    const c = await insertContact(orm, org.id, { properties: { mine: true } });
    const r = await upsert(request(c.email, { set: { theirs: true } }, otherKey));
    assert.equal(r.created, true);
    assert.notEqual(r.id, c.id);
    assert.deepEqual((await contact(org.id, c.email)).properties, { mine: true });
  });

  it('more than 100 properties: the table’s CHECK fails the statement', async () => {
    const set = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, i]));
    await assert.rejects(upsert(request(email(), { set })), /contacts_properties_limit/);
  });

  /**
   * The race: two upserts of one new address at once (different keys, so they do not queue on one
   * rate window), each setting its own property. They meet on the contact's key (behind a
   * transaction holding it, then rolled back): one creates the contact, the other updates it, and
   * both properties are kept.
   */
  it('race: concurrent upserts of one new address create one contact and lose no property', async () => {
    const address = email();
    const keys = [await insertKey(orm, org.id), await insertKey(orm, org.id), await insertKey(orm, org.id)];
    const rows = values(
      await releasedTogether(
        orm,
        [
          [
            `insert into contacts (id, organization_id, email, status, properties, created_at, updated_at) values ($1, $2, $3, 'subscribed', '{}', now(), now())`,
            [uuidv7(), org.id, address],
          ],
        ],
        keys.map((k, i) => () => upsert(request(address, { set: { [`p${i}`]: i } }, k))),
        'rollback',
      ),
    );
    assert.equal(rows.filter((r) => r.created).length, 1);
    assert.equal(new Set(rows.map((r) => r.id)).size, 1);
    const [n] = await sql(orm, 'select count(*)::int as n from contacts where organization_id = $1 and email = $2', [org.id, address]);
    assert.equal(n.n, 1);
    assert.deepEqual((await contact(org.id, address)).properties, { p0: 0, p1: 1, p2: 2 });
    assert.equal((await triggers(rows[0].id!)).length, 1, 'one contact.created');
  });

  /**
   * The race on a new topic: upserts of two contacts naming the same new slug at once. One topic is
   * created; the upsert that did not see it reports it short (topics_applied), for its caller to
   * run again, and writes no subscription for it.
   */
  it('race: concurrent upserts creating one topic make one topic; the one that missed it says so', async () => {
    const slug = unique('race-topic');
    const keys = [await insertKey(orm, org.id), await insertKey(orm, org.id), await insertKey(orm, org.id)];
    const rows = values(
      await releasedTogether(
        orm,
        [
          [
            `insert into topics (id, organization_id, slug, name, default_opt_in, created_at) values ($1, $2, $3, $3, true, now())`,
            [uuidv7(), org.id, slug],
          ],
        ],
        keys.map((k) => () => upsert(request(email(), { topics: [{ id: uuidv7(), slug }] }, k))),
        'rollback',
      ),
    );
    const [topics] = await sql(orm, 'select count(*)::int as n from topics where organization_id = $1 and slug = $2', [org.id, slug]);
    assert.equal(topics.n, 1);
    assert.deepEqual(rows.map((r) => r.topics_applied).sort(), [0, 0, 1]);
    const [subs] = await sql(orm, 'select count(*)::int as n from subscriptions s join topics t on t.id = s.topic_id where t.slug = $1', [
      slug,
    ]);
    assert.equal(subs.n, 1, 'only the upsert that saw the topic subscribed to it');
  });
});
