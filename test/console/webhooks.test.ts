import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { ConsoleClient, newOperator, type OperatorLogin } from '../support/console';
import { WebhookReceiver, type Received } from '../support/webhook-receiver';
import { waitFor } from '../support/wait';

const unescape = (s: string) =>
  s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&');
const alert = (page: string) => unescape(/<p class="error" role="alert">([\s\S]*?)<\/p>/.exec(page)?.[1] ?? '').trim();
const secretOf = (page: string) => /<code id="webhook-secret">\s*(whsec_[^<\s]+)\s*<\/code>/.exec(page)?.[1];
const rand = () => randomBytes(4).toString('hex');

let paths = 0;

/** The webhooks pages over HTTP against a real receiver: endpoints, deliveries and their actions, each through the API. */
describe('console: webhooks', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  let op: OperatorLogin;
  let c: ConsoleClient;
  let receiver: WebhookReceiver;
  let base: string;

  before(async function () {
    env = await sharedService();
    t = await newTenant(env);
    other = await newTenant(env);
    receiver = new WebhookReceiver();
    await receiver.start();
    op = await newOperator(env, t.orgId);
    c = new ConsoleClient(env.url);
    assert.equal((await c.signIn(op.email, op.password)).status, 303);
    base = `/console/o/${t.orgId}/webhooks`;
  });
  after(async () => receiver.stop());

  /** An endpoint registered through the API, on its own path of the receiver. */
  async function register(extra: Record<string, unknown> = {}) {
    const path = `/console-hook-${++paths}`;
    const res = await t.call('POST', '/api/v1/webhooks', {
      as: 'admin',
      body: { url: `${receiver.url}${path}`, events: ['contact.created'], ...extra },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return { id: res.body.id as string, secret: res.body.secret as string, path };
  }
  /** An event for every endpoint listening to contact.created. */
  const newContact = async () =>
    assert.equal((await t.call('POST', '/api/v1/contacts', { body: { email: `hook-${rand()}@example.com` } })).status, 201);
  const deliveries = async (id: string) => (await t.call('GET', `/api/v1/webhooks/${id}/deliveries`, { as: 'admin' })).body.data as any[];
  const auditBy = async (action: string, id: string) =>
    ((await t.call('GET', '/api/v1/audit-log?limit=100', { as: 'admin' })).body.data as any[]).filter(
      (e) => e.action === action && e.target?.id === id,
    );

  it('lists endpoints, and adds one whose secret is shown once and signs what it receives', async function () {
    const listed = await register({ description: '<i>ops</i>' });
    const list = await c.get(base);
    assert.equal(list.status, 200);
    assert.ok(list.html.includes(`href="${base}/${listed.id}"`));
    assert.ok(list.html.includes(`${receiver.url}${listed.path}`));
    assert.ok(list.html.includes('&lt;i&gt;ops&lt;/i&gt;') && !list.html.includes('<i>ops'));
    assert.ok(list.html.includes('contact.created'));

    const path = `/console-hook-${++paths}`;
    const made = await c.post(base, {
      url: `${receiver.url}${path}`,
      events: ['contact.created', 'contact.deleted'],
      description: 'made here',
    });
    assert.equal(made.status, 200, made.html);
    const secret = secretOf(made.html);
    assert.ok(secret, 'the secret is on the page');
    assert.match(made.html, /data-copy="webhook-secret"/);
    const mine = ((await t.call('GET', '/api/v1/webhooks', { as: 'admin' })).body.data as any[]).find(
      (w) => w.url === `${receiver.url}${path}`,
    );
    assert.ok(mine, 'the endpoint is in the API');
    assert.deepEqual(mine.events, ['contact.created', 'contact.deleted']);
    assert.equal(mine.description, 'made here');
    assert.equal((await auditBy('webhook.created', mine.id))[0]?.actor, `console:${op.email}`);
    const later = await c.get(`${base}/${mine.id}`);
    assert.equal(later.status, 200);
    assert.ok(!later.html.includes(secret!), 'shown once only');

    await newContact();
    const [got] = await waitFor(async () => (receiver.at(path).length ? receiver.at(path) : undefined), 'a delivery to the new endpoint');
    assert.ok(new Webhook(secret!).verify(got.body, got.headers), 'the secret shown signs the deliveries');

    const count = (await t.call('GET', '/api/v1/webhooks?limit=100', { as: 'admin' })).body.data.length;
    const refused = await c.post(base, { url: 'ftp://example.com/hook', events: ['contact.created'] });
    assert.equal(refused.status, 422);
    const api = await t.call('POST', '/api/v1/webhooks', { as: 'admin', body: { url: 'ftp://example.com/hook' } });
    assert.equal(alert(refused.html), api.body.error.message);
    assert.ok(!secretOf(refused.html));
    assert.equal((await t.call('GET', '/api/v1/webhooks?limit=100', { as: 'admin' })).body.data.length, count);
  });

  it('shows deliveries with their status and response, retries one, and recovers the failed ones since a time', async function () {
    const hook = await register();
    await newContact();
    const [d] = await waitFor(async () => {
      const list = await deliveries(hook.id);
      return list[0]?.status === 'succeeded' ? list : undefined;
    }, 'a delivery');
    const page = await c.get(`${base}/${hook.id}`);
    assert.equal(page.status, 200);
    assert.ok(page.html.includes('contact.created'));
    assert.match(page.html, /<span class="good">\s*succeeded\s*<\/span>/);
    assert.match(page.html, /<strong>200<\/strong>/);
    const filtered = await c.get(`${base}/${hook.id}?status=failed`);
    assert.ok(filtered.html.includes('No deliveries with that status.'));

    const retried = await c.post(`${base}/${hook.id}/deliveries/${d.id}/retry`);
    assert.equal(retried.status, 303);
    assert.match(retried.location!, /done=delivery_retried/);
    await waitFor(async () => receiver.at(hook.path).length === 2, 'the retry');
    assert.deepEqual([...new Set(receiver.at(hook.path).map((r: Received) => r.headers['webhook-id']))], [d.id]);
    assert.equal((await auditBy('webhook.delivery_retried', hook.id))[0]?.actor, `console:${op.email}`);

    await waitFor(async () => {
      const [now] = await deliveries(hook.id);
      return now.status === 'succeeded' && now.attempts === 2;
    }, 'the retry recorded');
    // A failed delivery (as the engine leaves one), then recover since a time before it.
    const since = new Date(Date.now() - 60_000).toISOString().slice(0, 19);
    await env.service.db.orm.em.fork().getConnection().execute(`update webhook_deliveries set status = 'failed' where id = ?`, [d.id]);
    const recovered = await c.post(`${base}/${hook.id}/recover`, { since });
    assert.equal(recovered.status, 303, recovered.html);
    assert.match(recovered.location!, /done=recovered/);
    await waitFor(async () => receiver.at(hook.path).length === 3, 'the recovered delivery');
    const [entry] = await auditBy('webhook.recovered', hook.id);
    assert.equal(entry?.actor, `console:${op.email}`);
    assert.equal(entry.details.since, `${since}.000Z`);
    const bad = await c.post(`${base}/${hook.id}/recover`, { since: 'yesterday' });
    assert.equal(bad.status, 422);
    assert.match(alert(bad.html), /since must be an ISO 8601 timestamp/);
  });

  it('rotates the secret: the new one is shown once, differs, and signs', async function () {
    const hook = await register();
    const rotated = await c.post(`${base}/${hook.id}/rotate-secret`);
    assert.equal(rotated.status, 200);
    const secret = secretOf(rotated.html);
    assert.ok(secret);
    assert.notEqual(secret, hook.secret);
    assert.match(rotated.html, /keeps signing next to the new one until/);
    assert.equal((await auditBy('webhook.secret_rotated', hook.id))[0]?.actor, `console:${op.email}`);
    await newContact();
    const [got] = await waitFor(
      async () => (receiver.at(hook.path).length ? receiver.at(hook.path) : undefined),
      'a delivery after rotation',
    );
    assert.ok(new Webhook(secret!).verify(got.body, got.headers));
    assert.ok(!(await c.get(`${base}/${hook.id}`)).html.includes(secret!));
  });

  it('shows a disabled endpoint’s banner with its reason, refuses its retry with the API’s words, and enables it again', async function () {
    const hook = await register();
    await newContact();
    const [d] = await waitFor(async () => {
      const list = await deliveries(hook.id);
      return list[0]?.status === 'succeeded' ? list : undefined;
    }, 'a delivery');
    // As a 410 answer leaves it (test/api/webhooks.test.ts drives that path).
    await env.service.db.orm.em
      .fork()
      .getConnection()
      .execute(`update webhook_endpoints set enabled = false, disabled_reason = 'gone' where id = ?`, [hook.id]);
    const page = await c.get(`${base}/${hook.id}`);
    const banner = /<p class="banner" role="status">([\s\S]*?)<\/p>/.exec(page.html)?.[1];
    assert.ok(banner, 'the banner');
    assert.match(banner!, /410 Gone/);
    assert.match(page.html, new RegExp(`action="${base}/${hook.id}/enable"`));
    assert.ok(!page.html.includes('/retry"'), 'no retry buttons while disabled');
    const list = await c.get(base);
    assert.match(list.html, /disabled<\/span>\s*— its receiver answered 410 Gone/);
    const retry = await c.post(`${base}/${hook.id}/deliveries/${d.id}/retry`);
    assert.equal(retry.status, 409);
    assert.match(alert(retry.html), /the webhook is disabled/);

    const enabled = await c.post(`${base}/${hook.id}/enable`);
    assert.equal(enabled.status, 303);
    assert.match(enabled.location!, /done=webhook_enabled/);
    const after = (await t.call('GET', `/api/v1/webhooks/${hook.id}`, { as: 'admin' })).body;
    assert.equal(after.enabled, true);
    const again = await c.get(enabled.location!);
    assert.ok(!again.html.includes('class="banner"'));
    assert.ok(again.html.includes('The endpoint was enabled again.'));
    assert.equal((await auditBy('webhook.updated', hook.id))[0]?.actor, `console:${op.email}`);

    const disabled = await c.post(`${base}/${hook.id}/disable`);
    assert.equal(disabled.status, 303);
    assert.equal((await t.call('GET', `/api/v1/webhooks/${hook.id}`, { as: 'admin' })).body.disabled_reason, 'api');
    assert.match((await c.get(`${base}/${hook.id}`)).html, /<p class="banner" role="status">[^<]*disabled by an operator/);
  });

  it('keeps an admin of another organization out: 403 and nothing written', async function () {
    const hook = await register();
    const outsider = new ConsoleClient(env.url);
    const theirs = await newOperator(env, other.orgId);
    assert.equal((await outsider.signIn(theirs.email, theirs.password)).status, 303);
    assert.equal((await outsider.get(base)).status, 403);
    const detail = await outsider.get(`${base}/${hook.id}`);
    assert.equal(detail.status, 403);
    assert.ok(!detail.html.includes(hook.path));
    assert.equal((await outsider.post(`${base}/${hook.id}/rotate-secret`)).status, 403);
    assert.equal((await outsider.post(`${base}/${hook.id}/disable`)).status, 403);
    assert.deepEqual(await auditBy('webhook.secret_rotated', hook.id), []);
    assert.equal((await t.call('GET', `/api/v1/webhooks/${hook.id}`, { as: 'admin' })).body.enabled, true);
    // Their own organization's page does not hold it either.
    assert.equal((await outsider.get(`/console/o/${other.orgId}/webhooks/${hook.id}`)).status, 404);
  });
});
