import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { ConsoleClient, newOperator, type OperatorLogin } from '../support/console';
import { setPlan } from '../../core/limits/operator';

/** The audit log page: who did what (keys and console operators), filtered by actor and action, paged by the API's cursor. */
describe('console: audit log', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  let admin: OperatorLogin;
  let c: ConsoleClient;
  let keyId: string;
  let broadcastId: string;

  /** Each listed entry carries one "only this action" link: its action. */
  const actionsOn = (page: string) => [...page.matchAll(/title="Only this action">([^<]*)<\/a>/g)].map((m) => m[1]);
  const base = () => `/console/o/${t.orgId}/audit`;

  before(async function () {
    env = await sharedService();
    t = await newTenant(env, { stream: 'bulk' });
    other = await newTenant(env);
    admin = await newOperator(env, t.orgId);
    c = new ConsoleClient(env.url);
    assert.equal((await c.signIn(admin.email, admin.password)).status, 303);
    // Two key writes, then one console write.
    const segment = await t.call('POST', '/api/v1/segments', {
      as: 'admin',
      body: { name: '<script>seg</script>', filter: { all: [{ status: 'SUBSCRIBED' }] } },
    });
    assert.equal(segment.status, 201, JSON.stringify(segment.body));
    const b = await t.call('POST', '/api/v1/broadcasts', {
      as: 'admin',
      body: {
        segment_id: segment.body.id,
        from: `news@${t.domain}`,
        subject: 'Later',
        text: 'x',
        scheduled_at: new Date(Date.now() + 3_600_000).toISOString(),
      },
    });
    assert.equal(b.status, 201, JSON.stringify(b.body));
    broadcastId = b.body.id;
    await c.get(`/console/o/${t.orgId}/broadcasts/${broadcastId}`);
    assert.equal((await c.post(`/console/o/${t.orgId}/broadcasts/${broadcastId}/cancel`)).status, 303);
    // And one change made with svc (no key, no console): actor `operator`.
    await setPlan(env.service.db.orm, t.orgId, 'free');
    const log = await t.call('GET', '/api/v1/audit-log?action=segment.created', { as: 'admin' });
    keyId = log.body.data[0].key_id;
    assert.ok(keyId);
  });

  it('shows time, actor, action, target and details, escaped', async function () {
    const page = await c.get(base());
    assert.equal(page.status, 200);
    assert.deepEqual(actionsOn(page.html), ['organization.plan_set', 'broadcast.canceled', 'broadcast.created', 'segment.created']);
    assert.ok(page.html.includes(`>console:${admin.email}</a>`));
    assert.ok(page.html.includes(`>key:${keyId}</a>`));
    assert.ok(page.html.includes(`href="/console/o/${t.orgId}/broadcasts/${broadcastId}"`), 'the target links to its page');
    assert.ok(page.html.includes('&quot;name&quot;:&quot;&lt;script&gt;seg&lt;/script&gt;&quot;'), 'details as escaped JSON');
    assert.ok(!page.html.includes('<script>seg'));
    assert.match(page.html, /<time datetime="\d{4}-/);
  });

  it('filters by actor: the console operator, a key, svc, or nobody', async function () {
    const mine = await c.get(`${base()}?actor=${encodeURIComponent(`console:${admin.email}`)}`);
    assert.equal(mine.status, 200);
    assert.deepEqual(actionsOn(mine.html), ['broadcast.canceled']);
    assert.ok(mine.html.includes(`value="console:${admin.email}"`), 'the form keeps the filter');
    const key = await c.get(`${base()}?actor=key:${keyId}`);
    assert.deepEqual(actionsOn(key.html), ['broadcast.created', 'segment.created']);
    const svc = await c.get(`${base()}?actor=operator`);
    assert.deepEqual(actionsOn(svc.html), ['organization.plan_set']);
    const nobody = await c.get(`${base()}?actor=console:nobody@example.com`);
    assert.deepEqual(actionsOn(nobody.html), []);
    assert.match(nobody.html, /No entries match\./);
  });

  it('filters by action, and pages with the cursor keeping the filter', async function () {
    const only = await c.get(`${base()}?action=segment.created`);
    assert.deepEqual(actionsOn(only.html), ['segment.created']);
    for (let i = 0; i < 26; i++) {
      const res = await t.call('POST', '/api/v1/topics', { as: 'admin', body: { slug: `t${i}`, name: `Topic ${i}` } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    const first = await c.get(`${base()}?action=topic.created`);
    assert.equal(actionsOn(first.html).length, 25);
    assert.ok(actionsOn(first.html).every((a) => a === 'topic.created'));
    const next = /<a href="([^"]+)" rel="next">/.exec(first.html)?.[1].replaceAll('&amp;', '&');
    assert.ok(next, 'a next-page link');
    assert.match(next!, /action=topic.created/);
    assert.match(next!, /cursor=/);
    const second = await c.get(next!);
    assert.deepEqual(actionsOn(second.html), ['topic.created']);
    assert.ok(!second.html.includes('rel="next"'), 'the last page has no next link');
    // The topic on the second page is the oldest: t0.
    assert.ok(second.html.includes('&quot;slug&quot;:&quot;t0&quot;'));
  });

  it('shows the API refusal of a bad cursor, and keeps another organization out', async function () {
    const bad = await c.get(`${base()}?cursor=not-a-cursor`);
    assert.equal(bad.status, 422);
    assert.match(bad.html, /<p class="error" role="alert">cursor is not valid; pass next_cursor from a previous page unchanged<\/p>/);
    const foreign = await c.get(`/console/o/${other.orgId}/audit`);
    assert.equal(foreign.status, 403);
    assert.ok(!foreign.html.includes('Only this action'));
  });
});
