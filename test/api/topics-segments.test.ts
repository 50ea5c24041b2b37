import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { createKey } from '../../core/provisioning';
import { request } from '../support/http';

/** Topics, segments and the contacts list (ours: docs/api.md, Audience) against the running app. */
describe('API: topics, segments and the contacts list', function () {
  let env: TestEnv;
  let t: Tenant;
  let full: string;
  let restrictedFull: string;
  const sql = async (text: string, params: unknown[] = []) => env.service.db.orm.em.fork().getConnection().execute(text, params);
  const admin = (method: string, path: string, body?: unknown) => t.call(method, path, { as: 'admin', body });
  const upsert = async (body: Record<string, unknown>) => {
    const res = await t.call('POST', '/api/v1/contacts', { body });
    assert.ok(res.status === 200 || res.status === 201, JSON.stringify(res.body));
    return res.body;
  };
  const subscribe = async (id: string, topic: string, state: string) => {
    const res = await t.call('POST', `/api/v1/contacts/${id}/subscriptions`, { body: { topic, state } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  };
  const listAll = async (query: string, token = full) => {
    const emails: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 50; page++) {
      const res = await request(env.url, 'GET', `/api/v1/contacts?limit=2&${query}${cursor ? `&cursor=${cursor}` : ''}`, { token });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.object, 'list');
      emails.push(...res.body.data.map((c: { email: string }) => c.email));
      cursor = res.body.next_cursor;
      if (!cursor) break;
    }
    return emails;
  };

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    t = await newTenant(env);
    full = (await createKey(env.service.db.orm, t.orgId, { name: 'full', permission: 'full', mode: 'live', rateLimit: 1000 })).token;
    restrictedFull = (
      await createKey(env.service.db.orm, t.orgId, {
        name: 'rf',
        permission: 'full',
        mode: 'live',
        domainIds: [t.domainId],
        rateLimit: 1000,
      })
    ).token;
  });

  it('creates, reads, lists, updates and deletes topics, each write in the audit log', async () => {
    const made = await admin('POST', '/api/v1/topics', { slug: 'product-news', name: 'Product news', default_opt_in: true });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.deepEqual(Object.keys(made.body).sort(), ['created_at', 'default_opt_in', 'id', 'name', 'object', 'slug']);
    assert.equal(made.body.object, 'topic');
    const plain = await admin('POST', '/api/v1/topics', { slug: '9_digest' });
    assert.equal(plain.body.name, '9_digest', 'name defaults to the slug');
    assert.equal(plain.body.default_opt_in, false, 'explicit topics default to opt-in off');
    const dup = await admin('POST', '/api/v1/topics', { slug: 'product-news', name: 'Again' });
    assert.equal(dup.status, 409);
    assert.equal(dup.body.error.code, 'topic_exists');
    for (const slug of ['', 'Upper', '-lead', '_lead', 'a b', 'x'.repeat(65), 'ü']) {
      const bad = await admin('POST', '/api/v1/topics', { slug, name: 'x' });
      assert.equal(bad.status, 422, slug);
      assert.equal(bad.body.error.code, 'validation_error');
    }
    assert.equal((await admin('POST', '/api/v1/topics', { slug: 'ok', extra: 1 })).status, 422);
    const got = await admin('GET', '/api/v1/topics/product-news');
    assert.deepEqual(got.body, made.body);
    const list = await admin('GET', '/api/v1/topics?limit=1');
    assert.equal(list.body.object, 'list');
    assert.equal(list.body.data[0].slug, '9_digest', 'newest first');
    const page2 = await admin('GET', `/api/v1/topics?limit=1&cursor=${list.body.next_cursor}`);
    assert.equal(page2.body.data[0].slug, 'product-news');
    const patched = await admin('PATCH', '/api/v1/topics/product-news', { name: 'News', default_opt_in: false });
    assert.equal(patched.status, 200);
    assert.equal(patched.body.name, 'News');
    assert.equal(patched.body.default_opt_in, false);
    assert.equal((await admin('PATCH', '/api/v1/topics/product-news', { slug: 'renamed' })).status, 422);
    assert.equal((await admin('GET', '/api/v1/topics/nope')).status, 404);

    const c = await upsert({ email: 'topic-del@people.example', topics: ['9_digest'] });
    const deleted = await admin('DELETE', '/api/v1/topics/9_digest');
    assert.equal(deleted.status, 200);
    assert.equal(deleted.body.deleted, true);
    const [{ subs }] = await sql(`select count(*)::int as subs from subscriptions where contact_id = ?`, [c.id]);
    assert.equal(subs, 0, "the topic's subscription rows go with it");
    const after = await t.call('GET', `/api/v1/contacts/${c.id}`);
    assert.deepEqual(
      after.body.subscriptions.map((s: { topic: string }) => s.topic),
      ['product-news'],
    );
    const log = await admin('GET', '/api/v1/audit-log?limit=5');
    assert.deepEqual(
      log.body.data.map((e: { action: string }) => e.action),
      ['topic.deleted', 'topic.updated', 'topic.created', 'topic.created'],
    );
    // ADMIN only: SEND keys are forbidden, test keys refused.
    assert.equal((await t.call('GET', '/api/v1/topics')).body.error.code, 'forbidden');
    assert.equal((await t.call('POST', '/api/v1/topics', { as: 'test', body: { slug: 'x' } })).body.error.code, 'test_key_not_allowed');
  });

  describe('segments and list filters on the effective state', () => {
    /** Contacts with known states: in (default opt-in) and out (default opt-out) topics. */
    const people: Record<string, { id: string; email: string }> = {};

    before(async () => {
      await admin('POST', '/api/v1/topics', { slug: 'seg-in', default_opt_in: true });
      await admin('POST', '/api/v1/topics', { slug: 'seg-out', default_opt_in: false });
      // Created in this order, so newest first is the reverse.
      for (const name of ['plain', 'unsub-in', 'sub-out', 'bounced', 'unsubscribed', 'both'])
        people[name] = await upsert({ email: `${name}@seg.example` });
      await subscribe(people['unsub-in'].id, 'seg-in', 'unsubscribed');
      await subscribe(people['sub-out'].id, 'seg-out', 'subscribed');
      await upsert({ email: 'bounced@seg.example', status: 'bounced' });
      await upsert({ email: 'unsubscribed@seg.example', status: 'unsubscribed' });
      await subscribe(people.both.id, 'seg-out', 'subscribed');
      await subscribe(people.both.id, 'seg-in', 'subscribed');
    });

    const segment = async (filter: unknown) => {
      const res = await admin('POST', '/api/v1/segments', { name: 'S', filter });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return res.body;
    };
    const seg = (emails: string[]) => emails.filter((e) => e.endsWith('@seg.example')).sort();
    const members = (...names: string[]) => names.map((n) => `${n}@seg.example`).sort();

    it('counts members by effective state: explicit rows, else the topic default', async () => {
      const cases: [unknown, string[]][] = [
        [{ all: [{ topic: 'seg-in', state: 'SUBSCRIBED' }] }, ['plain', 'sub-out', 'bounced', 'unsubscribed', 'both']],
        [{ all: [{ topic: 'seg-in', state: 'UNSUBSCRIBED' }] }, ['unsub-in']],
        [{ all: [{ topic: 'seg-out', state: 'SUBSCRIBED' }] }, ['sub-out', 'both']],
        [{ all: [{ topic: 'seg-out', state: 'UNSUBSCRIBED' }] }, ['plain', 'unsub-in', 'bounced', 'unsubscribed']],
        [{ all: [{ status: 'SUBSCRIBED' }, { topic: 'seg-in', state: 'SUBSCRIBED' }] }, ['plain', 'sub-out', 'both']],
        [{ all: [{ status: 'BOUNCED' }] }, ['bounced']],
        [{ all: [{ status: 'UNSUBSCRIBED' }, { topic: 'seg-out', state: 'UNSUBSCRIBED' }] }, ['unsubscribed']],
      ];
      for (const [filter, expected] of cases) {
        const s = await segment(filter);
        // Only this block's contacts carry conditions on seg-* topics, but status conditions match others: list to compare.
        const listed = seg(await listAll(`segment_id=${s.id}`));
        assert.deepEqual(listed, members(...expected), JSON.stringify(filter));
        const others = (await listAll(`segment_id=${s.id}`)).length - listed.length;
        assert.equal(s.contact_count, expected.length + others, JSON.stringify(filter));
        assert.deepEqual(s.filter, filter, 'the filter as given');
        const fresh = await admin('GET', `/api/v1/segments/${s.id}`);
        assert.equal(fresh.body.contact_count, s.contact_count);
      }
    });

    it('keeps contact_count fresh, and a deleted topic makes its condition match nobody', async () => {
      await admin('POST', '/api/v1/topics', { slug: 'seg-tmp', default_opt_in: true });
      const s = await segment({ all: [{ topic: 'seg-tmp', state: 'SUBSCRIBED' }] });
      const base = s.contact_count;
      assert.ok(base >= 6);
      await upsert({ email: 'late@seg.example' });
      assert.equal((await admin('GET', `/api/v1/segments/${s.id}`)).body.contact_count, base + 1);
      await admin('DELETE', '/api/v1/topics/seg-tmp');
      assert.equal((await admin('GET', `/api/v1/segments/${s.id}`)).body.contact_count, 0);
      assert.deepEqual(await listAll(`segment_id=${s.id}`), []);
    });

    it('filters the list by status, topic + state, segment and email prefix, newest first with a keyset cursor', async () => {
      const all = await listAll('');
      assert.ok(all.length >= 6);
      assert.deepEqual(await listAll('email=UNSUB'), ['unsubscribed@seg.example', 'unsub-in@seg.example'], 'a prefix, in any case');
      assert.deepEqual(
        all.filter((e) => Object.keys(people).some((n) => e === `${n}@seg.example`)),
        ['both', 'unsubscribed', 'bounced', 'sub-out', 'unsub-in', 'plain'].map((n) => `${n}@seg.example`),
        'newest first',
      );
      assert.deepEqual(seg(await listAll('status=bounced')), members('bounced'));
      assert.deepEqual(seg(await listAll('topic=seg-out&state=subscribed')), members('sub-out', 'both'));
      assert.deepEqual(seg(await listAll('topic=seg-in&state=unsubscribed&email=unsub')), members('unsub-in'));
      assert.deepEqual(await listAll('email=no_such%25prefix'), [], '% and _ are literal');
      const one = await request(env.url, 'GET', '/api/v1/contacts?limit=1&email=both%40seg', { token: full });
      assert.equal(one.body.data[0].object, 'contact');
      assert.ok(Array.isArray(one.body.data[0].subscriptions));
      assert.equal(one.body.next_cursor, undefined, 'no cursor on the last page');
    });

    it('refuses bad list queries and keys without the right to list', async () => {
      const cases: [string, string, number, string][] = [
        ['topic=seg-in', full, 422, 'validation_error'],
        ['state=subscribed', full, 422, 'validation_error'],
        ['topic=nope&state=subscribed', full, 422, 'unknown_topic'],
        ['status=SUBSCRIBED', full, 422, 'validation_error'],
        ['limit=0', full, 422, 'validation_error'],
        ['limit=101', full, 422, 'validation_error'],
        ['cursor=abc', full, 422, 'invalid_cursor'],
        ['segment_id=01a20000-0000-7000-8000-000000000000', full, 404, 'not_found'],
        ['segment_id=x', full, 404, 'not_found'],
        ['unknown=1', full, 422, 'validation_error'],
        ['', t.sendKey, 403, 'forbidden'],
        ['', restrictedFull, 403, 'forbidden_domain'],
      ];
      for (const [q, token, status, code] of cases) {
        const res = await request(env.url, 'GET', `/api/v1/contacts?${q}`, { token });
        assert.equal(res.status, status, `${q}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.error.code, code, q);
      }
      assert.equal((await t.call('GET', '/api/v1/contacts', { as: 'admin' })).status, 200, 'ADMIN is above FULL');
    });

    it('validates segment filters, lists and deletes segments with audit entries', async () => {
      const bad: [unknown, string][] = [
        [{ all: [{ topic: 'nope', state: 'SUBSCRIBED' }] }, 'unknown_topic'],
        [{ all: [{ topic: 'Not A Slug', state: 'SUBSCRIBED' }] }, 'unknown_topic'],
        [{ all: [] }, 'validation_error'],
        [{ all: Array.from({ length: 21 }, () => ({ status: 'SUBSCRIBED' })) }, 'validation_error'],
        [{ all: [{ status: 'subscribed' }] }, 'validation_error'],
        [{ all: [{ status: 'SUBSCRIBED', topic: 'seg-in' }] }, 'validation_error'],
        [{ all: [{ topic: 'seg-in' }] }, 'validation_error'],
        [{ all: [{ topic: 'seg-in', state: 'BOUNCED' }] }, 'validation_error'],
        [{ any: [{ status: 'SUBSCRIBED' }] }, 'validation_error'],
        [{ all: [{ status: 'SUBSCRIBED' }], extra: 1 }, 'validation_error'],
        [[{ status: 'SUBSCRIBED' }], 'validation_error'],
        ['all', 'validation_error'],
        [{ all: [null] }, 'validation_error'],
      ];
      const [{ before }] = await sql(`select count(*)::int as before from segments where organization_id = ?`, [t.orgId]);
      for (const [filter, code] of bad) {
        const res = await admin('POST', '/api/v1/segments', { name: 'bad', filter });
        assert.equal(res.status, 422, JSON.stringify(filter));
        assert.equal(res.body.error.code, code, JSON.stringify(filter));
      }
      assert.equal((await admin('POST', '/api/v1/segments', { filter: { all: [{ status: 'BOUNCED' }] } })).status, 422, 'name required');
      const [{ after }] = await sql(`select count(*)::int as after from segments where organization_id = ?`, [t.orgId]);
      assert.equal(after, before);

      const s = await segment({ all: [{ status: 'BOUNCED' }] });
      assert.deepEqual(Object.keys(s).sort(), ['contact_count', 'created_at', 'filter', 'id', 'name', 'object']);
      const list = await admin('GET', '/api/v1/segments?limit=1');
      assert.equal(list.body.data[0].id, s.id);
      assert.equal(typeof list.body.data[0].contact_count, 'number');
      assert.ok(list.body.next_cursor);
      const other = await newTenant(env);
      assert.equal((await other.call('GET', `/api/v1/segments/${s.id}`, { as: 'admin' })).status, 404, "another organization's segment");
      const deleted = await admin('DELETE', `/api/v1/segments/${s.id}`);
      assert.equal(deleted.body.deleted, true);
      assert.equal((await admin('GET', `/api/v1/segments/${s.id}`)).status, 404);
      const log = await admin('GET', '/api/v1/audit-log?limit=2');
      assert.deepEqual(
        log.body.data.map((e: { action: string }) => e.action),
        ['segment.deleted', 'segment.created'],
      );
    });
  });
});
