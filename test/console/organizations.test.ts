import assert from 'node:assert/strict';
import { createKey } from '../../core/provisioning';
import { request } from '../support/http';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { ConsoleClient, newOperator, type OperatorLogin } from '../support/console';

/** Organizations (platform operators): create one, set its plan, daily cap and postal address; the API shows them, audited. */
describe('console: organizations', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;
  let platform: OperatorLogin;
  let c: ConsoleClient;
  const sql = (text: string, params: unknown[] = []) => env.service.db.orm.em.fork().getConnection().execute(text, params);
  const orgCount = async () => Number((await sql('select count(*)::int as n from organizations'))[0].n);

  before(async function () {
    env = await sharedService();
    [t, platform] = await Promise.all([newTenant(env), newOperator(env, null)]);
    c = new ConsoleClient(env.url);
    assert.equal((await c.signIn(platform.email, platform.password)).status, 303);
  });

  it('creates an organization, sets plan, cap and postal address; its ADMIN key sees them; the audit log names the operator', async () => {
    const name = `Acme <script>x</script> ${Date.now()}`;
    const created = await c.post('/console/organizations', { name, plan: 'free' });
    assert.equal(created.status, 303, created.html);
    const m = /^\/console\/organizations\/([0-9a-f-]{36})\?done=organization_created$/.exec(created.location ?? '');
    assert.ok(m, created.location ?? '');
    const id = m[1];

    // Other test files' organizations are listed too (one service for them all): walk the pages to it.
    let list = await c.get('/console/organizations');
    for (let n = 2; !list.html.includes(`href="/console/organizations/${id}"`) && list.html.includes('rel="next"') && n < 400; n++) {
      assert.equal(list.status, 200);
      list = await c.get(`/console/organizations?page=${n}`);
    }
    assert.equal(list.status, 200);
    assert.ok(list.html.includes(`href="/console/organizations/${id}"`));
    assert.ok(list.html.includes('Acme &lt;script&gt;x&lt;/script&gt;'), 'the name is escaped');
    assert.ok(!list.html.includes('<script>x'));

    const detail = await c.get(created.location!);
    assert.equal(detail.status, 200);
    assert.match(detail.html, /The organization was created/);

    const address = '1 Main Street\nSpringfield 12345';
    const saved = await c.post(`/console/organizations/${id}`, { name, plan: 'standard', daily_send_cap: '5000', postal_address: address });
    assert.equal(saved.status, 303, saved.html);
    assert.equal(saved.location, `/console/organizations/${id}?done=organization_updated`);

    const { token } = await createKey(env.service.db.orm, id, { name: 'admin', permission: 'admin', mode: 'live' });
    const api = (path: string) => request(env.url, 'GET', `/api/v1${path}`, { token });
    const org = (await api('/organization')).body;
    assert.equal(org.name, name);
    assert.equal(org.plan, 'standard');
    assert.equal(org.daily_send_cap, 5000);
    assert.equal(org.effective_daily_send_cap, 5000);
    assert.equal(org.postal_address, address);

    const audit = (await api('/audit-log')).body.data as { action: string; actor: string; details: any }[];
    const by = (action: string) => audit.find((e) => e.action === action);
    for (const action of ['organization.created', 'organization.plan_set', 'organization.updated']) {
      assert.equal(by(action)?.actor, `console:${platform.email}`, action);
    }
    assert.deepEqual(by('organization.plan_set')?.details, { from: 'free', to: 'standard', by: 'operator' });
    assert.deepEqual(by('organization.updated')?.details.changes, { postal_address: address, daily_send_cap: 5000 });

    const shown = await c.get(`/console/organizations/${id}`);
    assert.ok(shown.html.includes('1 Main Street\nSpringfield 12345'));
    assert.match(shown.html.replace(/>\s+</g, '><'), /<dt>Plan<\/dt><dd>standard<\/dd>/);

    // A cap over the free plan's ceiling: the API's refusal, and neither the plan nor the cap changes.
    const refused = await c.post(`/console/organizations/${id}`, { name, plan: 'free', daily_send_cap: '5000', postal_address: address });
    assert.equal(refused.status, 422);
    assert.match(refused.html, /daily_send_cap can only lower the free plan(&#39;|&#x27;|')s ceiling of 100/);
    const after = (await api('/organization')).body;
    assert.equal(after.plan, 'standard');
    assert.equal(after.daily_send_cap, 5000);
    assert.equal((await api('/audit-log')).body.data.length, audit.length, 'nothing written');
  });

  it('sets how the organization’s live mail leaves (relay or direct), audited under the operator', async () => {
    const transportOf = async () =>
      (await env.service.db.orm.em.fork().getConnection().execute(`select transport from organizations where id = ?`, [t.orgId]))[0]
        .transport;
    const page = await c.get(`/console/organizations/${t.orgId}`);
    assert.match(page.html, /<option selected>relay<\/option>/);
    const set = await c.post(`/console/organizations/${t.orgId}/transport`, { transport: 'direct' });
    assert.equal(set.status, 303, set.html);
    assert.equal(set.location, `/console/organizations/${t.orgId}?done=transport_set`);
    assert.equal(await transportOf(), 'direct');
    assert.match((await c.get(set.location!)).html, /<option selected>direct<\/option>/);
    const log = (await t.call('GET', '/api/v1/audit-log?action=organization.transport_set', { as: 'admin' })).body.data;
    assert.equal(log[0].actor, `console:${platform.email}`);
    assert.deepEqual(log[0].details, { from: 'relay', to: 'direct' });
    const bad = await c.post(`/console/organizations/${t.orgId}/transport`, { transport: 'inherit' });
    assert.equal(bad.status, 422, 'an organization has no transport to inherit');
    assert.equal(await transportOf(), 'direct');
    assert.equal((await c.post(`/console/organizations/${t.orgId}/transport`, { transport: 'relay' })).status, 303);
    assert.equal(await transportOf(), 'relay');
  });

  it('refuses an organization without a name, and an unknown one is 404', async () => {
    const before = await orgCount();
    const res = await c.post('/console/organizations', { name: '   ', plan: 'free' });
    assert.equal(res.status, 422);
    assert.match(res.html, /Enter a name/);
    const badPlan = await c.post('/console/organizations', { name: 'Planless', plan: 'platinum' });
    assert.equal(badPlan.status, 422);
    assert.equal(await orgCount(), before);
    assert.equal((await c.get('/console/organizations/00000000-0000-7000-8000-000000000000')).status, 404);
    assert.equal((await c.get('/console/organizations/nope')).status, 404);
  });

  it('is for platform operators: an organization admin gets 403 on the list, a page and a change', async () => {
    const admin = await newOperator(env, t.orgId);
    const a = new ConsoleClient(env.url);
    assert.equal((await a.signIn(admin.email, admin.password)).status, 303);
    assert.equal((await a.get('/console/organizations')).status, 403);
    assert.equal((await a.get(`/console/organizations/${t.orgId}`)).status, 403);
    const before = await orgCount();
    assert.equal((await a.post('/console/organizations', { name: 'Sneaky', plan: 'standard' })).status, 403);
    assert.equal((await a.post(`/console/organizations/${t.orgId}`, { name: 'Renamed', plan: 'free', daily_send_cap: '' })).status, 403);
    assert.equal((await a.post(`/console/organizations/${t.orgId}/transport`, { transport: 'direct' })).status, 403);
    assert.equal(await orgCount(), before);
    const org = (await t.call('GET', '/api/v1/organization', { as: 'admin' })).body;
    assert.equal(org.plan, 'standard');
    assert.notEqual(org.name, 'Renamed');
  });
});
