import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { ConsoleClient, newOperator, type OperatorLogin } from '../support/console';
import { setSessionCookie } from '../../console/middleware';
import type { ConsoleDeps } from '../../console/state';

/** The console over plain HTTP: what its pages promise without a browser (headers, escaping, scope, CSRF). */
describe('console over HTTP', function () {
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  let platform: OperatorLogin;

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    t = await newTenant(env);
    other = await newTenant(env);
    platform = await newOperator(env, null);
  });

  it('sends a page without a session to sign-in, and every page carries a strict policy', async function () {
    const c = new ConsoleClient(env.url);
    const res = await c.get(`/console/o/${t.orgId}/messages`);
    assert.equal(res.status, 303);
    assert.equal(res.location, `/console/sign-in?next=${encodeURIComponent(`/console/o/${t.orgId}/messages`)}`);
    const form = await c.get('/console/sign-in');
    const csp = form.headers.get('content-security-policy')!;
    assert.match(csp, /script-src 'self'/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline/);
  });

  it('signs in, shows messages with a <script> subject as text, and refuses a post without the CSRF token', async function () {
    const sent = await t.call('POST', '/api/v1/emails', {
      body: {
        from: `app@${t.domain}`,
        to: 'x@example.com',
        subject: '<script>alert(1)</script>',
        html: '<p>hi<script>alert(2)</script></p>',
        scheduled_at: new Date(Date.now() + 3600_000).toISOString(),
      },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const c = new ConsoleClient(env.url);
    const signed = await c.signIn(platform.email, platform.password);
    assert.equal(signed.status, 303);
    const cookie = signed.headers.getSetCookie().find((x) => x.startsWith('svc_console='))!;
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Strict/);
    const list = await c.get(`/console/o/${t.orgId}/messages`);
    assert.equal(list.status, 200);
    assert.ok(list.html.includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
    assert.ok(!list.html.includes('<script>alert'));
    const detail = await c.get(`/console/o/${t.orgId}/messages/${sent.body.id}`);
    assert.match(detail.html, /<iframe class="preview"[^>]*sandbox=""/);
    const preview = await c.get(`/console/o/${t.orgId}/messages/${sent.body.id}/preview`);
    assert.match(preview.headers.get('content-security-policy')!, /^sandbox; default-src 'none'/);
    const refused = await c.post(`/console/o/${t.orgId}/messages/${sent.body.id}/cancel`, { _csrf: null });
    assert.equal(refused.status, 403);
    const canceled = await c.post(`/console/o/${t.orgId}/messages/${sent.body.id}/cancel`);
    assert.equal(canceled.status, 303);
    const after = await t.call('GET', `/api/v1/emails/${sent.body.id}`);
    assert.equal(after.body.last_event, 'canceled');
  });

  it('keeps an organization admin inside their organization: another one is 403 with nothing of it shown', async function () {
    const admin = await newOperator(env, t.orgId);
    const c = new ConsoleClient(env.url);
    assert.equal((await c.signIn(admin.email, admin.password)).status, 303);
    assert.equal((await c.get(`/console/o/${t.orgId}/messages`)).status, 200);
    const foreign = await c.get(`/console/o/${other.orgId}/messages`);
    assert.equal(foreign.status, 403);
    assert.ok(!foreign.html.includes('Tenant'));
    const missing = await c.get(`/console/o/00000000-0000-7000-8000-000000000000/messages`);
    assert.equal(missing.status, 403);
    assert.equal((await c.get('/console/organizations')).status, 403);
  });

  it('after sign-in goes only to a console page: a `next` naming another site lands on the overview', async function () {
    const c = new ConsoleClient(env.url);
    const form = await c.get(`/console/sign-in?next=${encodeURIComponent('https://evil.example/console/')}`);
    const pre = /name="_pre" value="([^"]*)"/.exec(form.html)![1];
    const next = /name="next" value="([^"]*)"/.exec(form.html)![1];
    assert.equal(next, '/console/overview');
    const res = await c.post('/console/sign-in', {
      _csrf: null,
      _pre: pre,
      next: '//evil.example/x',
      email: platform.email,
      password: platform.password,
    });
    assert.equal(res.status, 303);
    assert.equal(res.location, '/console/overview');
  });

  it('marks the session cookie Secure, under the __Host- prefix, when PUBLIC_URL is https', () => {
    const set: string[] = [];
    const ctx = { append: (_: string, v: string) => set.push(v) } as unknown as Parameters<typeof setSessionCookie>[0];
    setSessionCookie(ctx, { secureCookies: true } as ConsoleDeps, 'token');
    setSessionCookie(ctx, { secureCookies: false } as ConsoleDeps, 'token');
    assert.match(set[0], /^__Host-svc_console=token; Path=\/; HttpOnly; SameSite=Strict; Secure$/);
    assert.match(set[1], /^svc_console=token; Path=\/; HttpOnly; SameSite=Strict$/);
  });

  it('answers a wrong password without saying whether the account exists', async function () {
    const c = new ConsoleClient(env.url);
    const wrong = await c.signIn(platform.email, 'not the password at all');
    const unknown = await c.signIn('nobody-here@example.com', 'not the password at all');
    assert.equal(wrong.status, 401);
    assert.equal(unknown.status, 401);
    const text = (h: string) => /<p class="error" role="alert">([^<]*)<\/p>/.exec(h)?.[1];
    assert.equal(text(wrong.html), text(unknown.html));
  });
});
