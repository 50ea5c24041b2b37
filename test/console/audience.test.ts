import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { ConsoleClient, newOperator, type OperatorLogin } from '../support/console';

const unescape = (s: string) =>
  s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&');
const alert = (page: string) => unescape(/<p class="error" role="alert">([\s\S]*?)<\/p>/.exec(page)?.[1] ?? '');
const rand = () => randomBytes(4).toString('hex');

/** The audience page over HTTP: topics, segments and contacts, each through the API (issue 38). */
describe('console: audience', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  let op: OperatorLogin;
  let c: ConsoleClient;
  let base: string;

  before(async function () {
    env = await sharedService();
    t = await newTenant(env);
    other = await newTenant(env);
    op = await newOperator(env, t.orgId);
    c = new ConsoleClient(env.url);
    assert.equal((await c.signIn(op.email, op.password)).status, 303);
    base = `/console/o/${t.orgId}/audience`;
  });

  const auditBy = async (action: string, id?: string) =>
    ((await t.call('GET', '/api/v1/audit-log?limit=100', { as: 'admin' })).body.data as any[]).filter(
      (e) => e.action === action && (id === undefined || e.target?.id === id),
    );

  it('creates a topic and a segment; both show in the API, audited as the operator, and the live count is the API’s', async function () {
    const slug = `news-${rand()}`;
    const made = await c.post(`${base}/topics`, { slug, name: 'News <b>weekly</b>', default_opt_in: '1' });
    assert.equal(made.status, 303, made.html);
    assert.match(made.location!, /done=topic_created/);
    const topics = (await t.call('GET', '/api/v1/topics', { as: 'admin' })).body.data as any[];
    const topic = topics.find((x) => x.slug === slug);
    assert.ok(topic, 'the topic is in the API');
    assert.equal(topic.name, 'News <b>weekly</b>');
    assert.equal(topic.default_opt_in, true);

    const emails = [0, 1, 2].map((i) => `seg-${i}-${rand()}@example.com`);
    for (const email of emails) assert.equal((await t.call('POST', '/api/v1/contacts', { body: { email } })).status, 201);
    await t.call('POST', `/api/v1/contacts/${encodeURIComponent(emails[0])}/subscriptions`, {
      body: { topic: slug, state: 'unsubscribed' },
    });

    const name = `Readers ${rand()}`;
    const filter = JSON.stringify({ all: [{ topic: slug, state: 'SUBSCRIBED' }] });
    const seg = await c.post(`${base}/segments`, { name, filter });
    assert.equal(seg.status, 303, seg.html);
    assert.match(seg.location!, /done=segment_created/);
    const segment = ((await t.call('GET', '/api/v1/segments', { as: 'admin' })).body.data as any[]).find((x) => x.name === name);
    assert.ok(segment, 'the segment is in the API');
    assert.deepEqual(segment.filter, JSON.parse(filter));
    assert.equal(segment.contact_count, 2, 'the two with the default opt-in');

    const page = await c.get(`${base}?done=segment_created`);
    assert.equal(page.status, 200);
    assert.ok(page.html.includes('The segment was created.'));
    assert.ok(page.html.includes('News &lt;b&gt;weekly&lt;/b&gt;'), 'the topic name is escaped');
    assert.ok(!page.html.includes('<b>weekly'));
    assert.ok(page.html.includes(`<code>${slug}</code>`));
    const shown = new RegExp(`data-segment-count="${segment.id}">(\\d+)<`).exec(page.html)?.[1];
    assert.equal(Number(shown), segment.contact_count, 'the console counts what the API counts');
    // Live: another subscriber changes the count on the next read.
    assert.equal((await t.call('POST', '/api/v1/contacts', { body: { email: `seg-3-${rand()}@example.com` } })).status, 201);
    const again = await c.get(base);
    assert.equal(new RegExp(`data-segment-count="${segment.id}">(\\d+)<`).exec(again.html)?.[1], '3');

    for (const [action, id] of [
      ['topic.created', topic.id],
      ['segment.created', segment.id],
    ]) {
      const [entry] = await auditBy(action, id);
      assert.ok(entry, action);
      assert.equal(entry.actor, `console:${op.email}`);
    }
  });

  it('refuses bad segment conditions with the API’s message and creates nothing', async function () {
    const before = (await t.call('GET', '/api/v1/segments?limit=100', { as: 'admin' })).body.data.length;
    for (const filter of [
      JSON.stringify({ all: [{ status: 'ACTIVE' }] }),
      JSON.stringify({ all: [{ topic: 'no-such-topic', state: 'SUBSCRIBED' }] }),
    ]) {
      const api = await t.call('POST', '/api/v1/segments', { as: 'admin', body: { name: 'direct', filter: JSON.parse(filter) } });
      assert.equal(api.status, 422);
      const res = await c.post(`${base}/segments`, { name: 'Bad <one>', filter });
      assert.equal(res.status, 422);
      assert.equal(alert(res.html), api.body.error.message);
      assert.ok(res.html.includes(filter.replace(/"/g, '&quot;')), 'the conditions typed are shown again');
      assert.ok(res.html.includes('value="Bad &lt;one&gt;"'));
    }
    const notJson = await c.post(`${base}/segments`, { name: 'Bad', filter: '{all: nope' });
    assert.equal(notJson.status, 422);
    assert.match(alert(notJson.html), /not JSON/);
    const badSlug = await c.post(`${base}/topics`, { slug: 'Not A Slug' });
    assert.equal(badSlug.status, 422);
    assert.match(alert(badSlug.html), /slug must be/);
    assert.equal((await t.call('GET', '/api/v1/segments?limit=100', { as: 'admin' })).body.data.length, before);
  });

  it('finds a contact by email, changes a subscription, deletes the contact (audited)', async function () {
    const slug = `alerts-${rand()}`;
    assert.equal((await c.post(`${base}/topics`, { slug, name: 'Alerts' })).status, 303);
    const prefix = `find-${rand()}`;
    const email = `${prefix}@example.com`;
    const created = await t.call('POST', '/api/v1/contacts', { body: { email, first_name: '<img src=x>', topics: [slug] } });
    assert.equal(created.status, 201);
    const id = created.body.id as string;
    await t.call('POST', '/api/v1/contacts', { body: { email: `someone-else-${rand()}@example.com` } });

    const found = await c.get(`${base}?email=${prefix}`);
    assert.equal(found.status, 200);
    assert.ok(found.html.includes(`href="${base}/contacts/${id}">${email}</a>`));
    assert.ok(!found.html.includes('someone-else-'), 'only what matches the search');
    assert.ok(found.html.includes('&lt;img src=x&gt;'));
    const none = await c.get(`${base}?email=nobody-${rand()}`);
    assert.ok(none.html.includes('No contacts match.'));
    const halfFilter = await c.get(`${base}?topic=${slug}`);
    assert.equal(halfFilter.status, 422);
    assert.match(alert(halfFilter.html), /topic and state/);

    const detail = await c.get(`${base}/contacts/${id}`);
    assert.equal(detail.status, 200);
    assert.match(detail.html, new RegExp(`name="topic:${slug}">\\s*<option selected>subscribed</option>`));
    const changed = await c.post(`${base}/contacts/${id}/subscriptions`, { [`topic:${slug}`]: 'unsubscribed' });
    assert.equal(changed.status, 303);
    assert.match(changed.location!, /done=subscriptions_changed/);
    const after = await t.call('GET', `/api/v1/contacts/${id}`);
    const sub = (after.body.subscriptions as any[]).find((s) => s.topic === slug);
    assert.equal(sub.state, 'unsubscribed');
    assert.equal(sub.explicit, true);
    const bad = await c.post(`${base}/contacts/${id}/subscriptions`, { [`topic:${slug}`]: 'subscribed', 'topic:zz': 'subscribed' });
    assert.equal(bad.status, 303, 'only the topics the contact has are read');

    assert.match(detail.html, /<form method="post" action="[^"]*\/delete" data-confirm=/);
    const deleted = await c.post(`${base}/contacts/${id}/delete`);
    assert.equal(deleted.status, 303);
    assert.match(deleted.location!, /done=contact_deleted/);
    assert.equal((await t.call('GET', `/api/v1/contacts/${id}`)).status, 404);
    const [entry] = await auditBy('contact.deleted', id);
    assert.equal(entry?.actor, `console:${op.email}`);
    assert.equal((await c.get(`${base}/contacts/${id}`)).status, 404);
  });

  it('keeps an admin of another organization out: 403 and nothing written', async function () {
    const outsider = new ConsoleClient(env.url);
    const theirs = await newOperator(env, other.orgId);
    assert.equal((await outsider.signIn(theirs.email, theirs.password)).status, 303);
    const page = await outsider.get(base);
    assert.equal(page.status, 403);
    const slug = `intruder-${rand()}`;
    assert.equal((await outsider.post(`${base}/topics`, { slug })).status, 403);
    const topics = (await t.call('GET', '/api/v1/topics?limit=100', { as: 'admin' })).body.data as any[];
    assert.ok(!topics.some((x) => x.slug === slug));
    assert.equal((await outsider.get(`/console/o/${other.orgId}/audience`)).status, 200);
  });
});
