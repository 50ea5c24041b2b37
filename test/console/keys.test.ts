import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { request } from '../support/http';
import { escapeHtml } from '../../core/html';
import { FlatConsoleClient, newOperator, type OperatorLogin } from '../support/console';

const shownToken = (page: string) => /<code id="new-token">([^<]+)<\/code>/.exec(page)?.[1];
const alertText = (page: string) => /<p class="error" role="alert">([^<]*)<\/p>/.exec(page)?.[1];

/** The keys page: create, rotate and revoke any tier, ADMIN included, through the API's own routes. */
describe('console: keys', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  let admin: OperatorLogin;
  let c: FlatConsoleClient;
  let base: string;

  const keysOf = async () => (await t.call('GET', '/api/v1/keys', { as: 'admin' })).body.data as any[];
  const asToken = (token: string) => request(env.url, 'GET', '/api/v1/keys', { token });

  before(async function () {
    env = await sharedService();
    t = await newTenant(env);
    other = await newTenant(env);
    admin = await newOperator(env, t.orgId);
    c = new FlatConsoleClient(env.url);
    assert.equal((await c.signIn(admin.email, admin.password)).status, 303);
    base = `/console/o/${t.orgId}/keys`;
  });

  it('lists the keys with prefix, permission, mode and domains, and offers the tenant domains to restrict to', async function () {
    const page = await c.get(base);
    assert.equal(page.status, 200);
    const keys = await keysOf();
    for (const k of keys) assert.ok(page.html.includes(`<code>${k.token_prefix}</code>`), k.name);
    assert.ok(page.html.includes(`name="domain_ids" value="${t.domainId}"`));
    assert.ok(page.html.includes(t.domain));
    assert.match(page.html, /<option value="admin"/);
  });

  it('creates an ADMIN key, shows its token once, and the token works on the API; rotate keeps the old one 24 h; revoke ends both', async function () {
    const before = await keysOf();
    const created = await c.post(base, {
      name: 'ops <b>admin</b>',
      permission: 'admin',
      mode: 'live',
      domain_ids: [t.domainId],
      rate_limit: '50',
    });
    assert.equal(created.status, 201, alertText(created.html));
    assert.ok(created.html.includes('ops &lt;b&gt;admin&lt;/b&gt;'));
    assert.ok(!created.html.includes('<b>admin</b>'));
    assert.match(created.html, /data-copy="new-token"/);
    const token = shownToken(created.html)!;
    assert.match(token, /^svc_live_/);
    assert.equal((await asToken(token)).status, 200);

    const after = await keysOf();
    assert.equal(after.length, before.length + 1);
    const key = after.find((k) => k.name === 'ops <b>admin</b>');
    assert.equal(key.permission, 'admin');
    assert.deepEqual(key.domain_ids, [t.domainId]);
    assert.equal(key.rate_limit, 50);
    // Never shown again: the list has the prefix only.
    const list = await c.get(base);
    assert.ok(!list.html.includes(token));
    assert.ok(list.html.includes(`<code>${key.token_prefix}</code>`));

    const rotated = await c.post(`${base}/${key.id}/rotate`);
    assert.equal(rotated.status, 200, alertText(rotated.html));
    const fresh = shownToken(rotated.html)!;
    assert.ok(fresh && fresh !== token);
    assert.equal((await asToken(fresh)).status, 200);
    assert.equal((await asToken(token)).status, 200, 'the old token keeps its grace');
    const shown = (await keysOf()).find((k) => k.id === key.id);
    const expiry = shown.previous_token_expires_at as string;
    const hours = (Date.parse(expiry) - Date.now()) / 3600_000;
    assert.ok(hours > 23.9 && hours <= 24, String(hours));
    assert.ok(rotated.html.includes(`<code>${key.token_prefix}</code> valid until <time datetime="${expiry}">`));
    const listed = await c.get(base);
    assert.ok(listed.html.includes(`previous <code>${key.token_prefix}</code> valid until <time datetime="${expiry}">`));
    assert.ok(listed.html.includes(`<code>${shown.token_prefix}</code>`));

    const revoked = await c.post(`${base}/${key.id}/revoke`);
    assert.equal(revoked.status, 303);
    assert.equal(revoked.location, `${base}?done=key_revoked`);
    assert.equal((await asToken(fresh)).status, 401);
    assert.equal((await asToken(token)).status, 401);
    assert.ok((await keysOf()).find((k) => k.id === key.id).revoked_at);
    const done = await c.get(revoked.location!);
    assert.ok(done.html.includes('The key was revoked.'));

    const log = await t.call('GET', `/api/v1/audit-log?actor=${encodeURIComponent(`console:${admin.email}`)}`, { as: 'admin' });
    const mine = (log.body.data as any[]).filter((e) => e.target.id === key.id);
    assert.deepEqual(mine.map((e) => e.action).sort(), ['key.created', 'key.revoked', 'key.rotated']);
    for (const e of mine) {
      assert.equal(e.actor, `console:${admin.email}`);
      assert.equal(e.key_id, null);
    }
  });

  it('shows the API refusal of a bad create and creates nothing', async function () {
    const before = await keysOf();
    const api = await t.call('POST', '/api/v1/keys', { as: 'admin', body: { name: '', permission: 'send', mode: 'live' } });
    assert.equal(api.status, 422);
    const res = await c.post(base, { name: '', permission: 'send', mode: 'live' });
    assert.equal(res.status, 422);
    assert.equal(alertText(res.html), escapeHtml(api.body.error.message));
    assert.equal(shownToken(res.html), undefined);
    const unknown = await c.post(base, { name: 'x', permission: 'send', mode: 'live', domain_ids: [other.domainId] });
    assert.equal(unknown.status, 422);
    assert.match(alertText(unknown.html)!, /unknown domain/);
    assert.equal((await keysOf()).length, before.length);
  });

  it('refuses an organization admin of another organization (403) and writes nothing', async function () {
    const outsider = await newOperator(env, other.orgId);
    const o = new FlatConsoleClient(env.url);
    assert.equal((await o.signIn(outsider.email, outsider.password)).status, 303);
    const before = await keysOf();
    const target = before.find((k) => k.name === 'send');
    const page = await o.get(base);
    assert.equal(page.status, 403);
    assert.ok(!page.html.includes(target.token_prefix));
    assert.equal((await o.post(base, { name: 'intruder', permission: 'admin', mode: 'live' })).status, 403);
    assert.equal((await o.post(`${base}/${target.id}/revoke`)).status, 403);
    assert.equal((await o.post(`${base}/${target.id}/rotate`)).status, 403);
    const now = await keysOf();
    assert.equal(now.length, before.length);
    assert.deepEqual(
      now.find((k) => k.id === target.id),
      target,
    );
  });
});
