import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { escapeHtml } from '../../core/html';
import { FlatConsoleClient, newOperator, type OperatorLogin } from '../support/console';

const alertText = (page: string) => /<p class="error" role="alert">([^<]*)<\/p>/.exec(page)?.[1];
const listed = (page: string) => [...page.matchAll(/<input type="hidden" name="email" value="([^"]+)"\/>/g)].map((m) => m[1]);

/** The suppressions page: search with the API's filters, add, remove. */
describe('console: suppressions', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  let admin: OperatorLogin;
  let c: FlatConsoleClient;
  let base: string;

  const apiList = async (q = '') => (await t.call('GET', `/api/v1/suppressions${q}`, { as: 'admin' })).body.data as any[];

  before(async function () {
    env = await sharedService();
    t = await newTenant(env);
    other = await newTenant(env);
    admin = await newOperator(env, t.orgId);
    c = new FlatConsoleClient(env.url);
    assert.equal((await c.signIn(admin.email, admin.password)).status, 303);
    base = `/console/o/${t.orgId}/suppressions`;
    // Listed through the API: what the page must show beside the console's own additions.
    assert.equal((await t.call('POST', '/api/v1/suppressions', { as: 'admin', body: { email: 'api-added@example.com' } })).status, 201);
  });

  it('adds an address, finds it by search and by reason, removes it; the API agrees and the audit log names the operator', async function () {
    const added = await c.post(base, { email: 'Someone.Else@Example.COM' });
    assert.equal(added.status, 303, alertText(added.html));
    assert.equal(added.location, `${base}?done=suppression_added`);
    const [row] = await apiList('?email=someone.else@example.com');
    assert.equal(row.reason, 'manual');

    const all = await c.get(added.location!);
    assert.equal(all.status, 200);
    assert.ok(all.html.includes('The address was suppressed.'));
    assert.deepEqual(listed(all.html), ['someone.else@example.com', 'api-added@example.com']);

    const found = await c.get(`${base}?email=${encodeURIComponent('someone.else@example.com')}`);
    assert.deepEqual(listed(found.html), ['someone.else@example.com']);
    assert.match(found.html, /<td>someone\.else@example\.com<\/td><td>manual<\/td>/);
    const byReason = await c.get(`${base}?reason=bounce`);
    assert.deepEqual(listed(byReason.html), []);
    assert.ok(byReason.html.includes('No suppressions match.'));

    const removed = await c.post(`${base}/remove`, { email: 'someone.else@example.com' });
    assert.equal(removed.status, 303, alertText(removed.html));
    assert.equal(removed.location, `${base}?done=suppression_removed`);
    assert.deepEqual(await apiList('?email=someone.else@example.com'), []);
    assert.deepEqual(
      (await apiList()).map((s) => s.email),
      ['api-added@example.com'],
    );

    const log = await t.call('GET', `/api/v1/audit-log?actor=${encodeURIComponent(`console:${admin.email}`)}`, { as: 'admin' });
    const mine = (log.body.data as any[]).filter((e) => e.target.id === row.id);
    assert.deepEqual(mine.map((e) => e.action).sort(), ['suppression.created', 'suppression.deleted']);
    for (const e of mine) assert.equal(e.key_id, null);
    assert.deepEqual(mine.find((e) => e.action === 'suppression.deleted').details, { email: 'someone.else@example.com', reason: 'manual' });
  });

  it('shows the API refusals: a bad address to add or to search, an address not listed to remove; nothing changes', async function () {
    const before = await apiList();
    const api = await t.call('POST', '/api/v1/suppressions', { as: 'admin', body: { email: 'not an address' } });
    assert.equal(api.status, 422);
    const bad = await c.post(base, { email: 'not an address' });
    assert.equal(bad.status, 422);
    assert.equal(alertText(bad.html), escapeHtml(api.body.error.message));
    assert.ok(bad.html.includes('value="not an address"'));
    const search = await c.get(`${base}?email=${encodeURIComponent('<script>x</script>')}`);
    assert.equal(search.status, 422);
    assert.ok(!search.html.includes('<script>x'));
    assert.ok(search.html.includes('&lt;script&gt;x&lt;/script&gt;'));
    const missing = await c.post(`${base}/remove`, { email: 'never-listed@example.com' });
    assert.equal(missing.status, 404);
    assert.ok(alertText(missing.html));
    assert.deepEqual(await apiList(), before);
  });

  it('refuses an organization admin of another organization (403) and writes nothing', async function () {
    const outsider = await newOperator(env, other.orgId);
    const o = new FlatConsoleClient(env.url);
    assert.equal((await o.signIn(outsider.email, outsider.password)).status, 303);
    const page = await o.get(base);
    assert.equal(page.status, 403);
    assert.ok(!page.html.includes('api-added@example.com'));
    assert.equal((await o.post(base, { email: 'intruder@example.com' })).status, 403);
    assert.equal((await o.post(`${base}/remove`, { email: 'api-added@example.com' })).status, 403);
    assert.deepEqual(
      (await apiList()).map((s) => s.email),
      ['api-added@example.com'],
    );
  });
});
