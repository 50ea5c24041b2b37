import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { ConsoleClient, newOperator, type OperatorLogin } from '../support/console';
import { waitFor } from '../support/wait';

/** The broadcasts and automations pages: progress, a run's current step, cancel through the API, audited under the operator. */
describe('console: broadcasts and automations', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  let admin: OperatorLogin;
  let c: ConsoleClient;
  let seq = 0;

  before(async function () {
    env = await sharedService();
    t = await newTenant(env, { stream: 'bulk' });
    other = await newTenant(env, { stream: 'bulk' });
    admin = await newOperator(env, t.orgId);
    c = new ConsoleClient(env.url);
    assert.equal((await c.signIn(admin.email, admin.password)).status, 303);
  });

  const address = (tag: string) => `${tag}-${Date.now()}-${++seq}@people.example`;
  const segmentOf = async (tenant: Tenant) => {
    const res = await tenant.call('POST', '/api/v1/segments', {
      as: 'admin',
      body: { name: `S${seq++}`, filter: { all: [{ status: 'SUBSCRIBED' }] } },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.id as string;
  };
  const createBroadcast = async (tenant: Tenant, body: object) => {
    const res = await tenant.call('POST', '/api/v1/broadcasts', {
      as: 'admin',
      body: { segment_id: await segmentOf(tenant), from: `news@${tenant.domain}`, subject: 'Hello', text: 'hello', ...body },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body as { id: string };
  };
  const auditOf = async (action: string) =>
    (await t.call('GET', `/api/v1/audit-log?action=${action}`, { as: 'admin' })).body.data as { actor: string; target: { id: string } }[];
  /** Page text with its whitespace runs as one space (the templates are formatted code). */
  const flat = (h: string) => h.replace(/\s+/g, ' ');
  const alertText = (h: string) => /<p class="error" role="alert">([^<]*)<\/p>/.exec(h)?.[1];

  it('lists broadcasts with their progress (escaped names) and shows a sent one counted', async function () {
    for (const tag of ['ann', 'bob'])
      assert.ok((await t.call('POST', '/api/v1/contacts', { as: 'admin', body: { email: address(tag) } })).status < 300);
    const b = await createBroadcast(t, { name: 'Nov <script>x</script>' });
    await waitFor(
      async () => {
        const got = (await t.call('GET', `/api/v1/broadcasts/${b.id}`, { as: 'admin' })).body;
        return got.status === 'sent' ? got : undefined;
      },
      'the broadcast sent',
      60_000,
    );
    const list = await c.get(`/console/o/${t.orgId}/broadcasts`);
    assert.equal(list.status, 200);
    assert.ok(list.html.includes('Nov &lt;script&gt;x&lt;/script&gt;'));
    assert.ok(!list.html.includes('<script>x'));
    const row = list.html.split('<tr>').find((r) => r.includes(b.id))!;
    assert.match(row, />sent</);
    assert.match(flat(row), /<progress value="2" max="2"/);
    assert.match(flat(row), /2 of 2 processed/);
    const detail = await c.get(`/console/o/${t.orgId}/broadcasts/${b.id}`);
    assert.equal(detail.status, 200);
    assert.match(flat(detail.html), /<h1>Nov &lt;script&gt;x&lt;\/script&gt;<\/h1>/);
    assert.ok(!detail.html.includes('Cancel broadcast'), 'a sent broadcast offers no cancel');
    assert.equal((await c.get(`/console/o/${t.orgId}/broadcasts/00000000-0000-7000-8000-000000000000`)).status, 404);
  });

  it('cancels a scheduled broadcast through the API (audited as the operator); a second cancel shows the refusal', async function () {
    const b = await createBroadcast(t, { name: 'Later', scheduled_at: new Date(Date.now() + 3_600_000).toISOString() });
    const page = await c.get(`/console/o/${t.orgId}/broadcasts/${b.id}`);
    assert.match(page.html, />queued</);
    assert.match(flat(page.html), /<form method="post" action="\/console\/o\/[^"]+\/cancel" data-confirm=/);
    assert.equal((await c.post(`/console/o/${t.orgId}/broadcasts/${b.id}/cancel`, { _csrf: null })).status, 403);
    assert.equal((await t.call('GET', `/api/v1/broadcasts/${b.id}`, { as: 'admin' })).body.status, 'queued');
    const done = await c.post(`/console/o/${t.orgId}/broadcasts/${b.id}/cancel`);
    assert.equal(done.status, 303);
    assert.equal(done.location, `/console/o/${t.orgId}/broadcasts/${b.id}?done=broadcast_canceled`);
    assert.equal((await t.call('GET', `/api/v1/broadcasts/${b.id}`, { as: 'admin' })).body.status, 'canceled');
    const entries = (await auditOf('broadcast.canceled')).filter((e) => e.target.id === b.id);
    assert.deepEqual(
      entries.map((e) => e.actor),
      [`console:${admin.email}`],
    );
    const shown = await c.get(done.location!);
    assert.match(shown.html, /The broadcast was canceled\./);
    const again = await c.post(`/console/o/${t.orgId}/broadcasts/${b.id}/cancel`);
    assert.equal(again.status, 409);
    assert.equal(alertText(again.html), 'broadcast is canceled; only a queued or sending broadcast can be canceled');
    assert.equal((await auditOf('broadcast.canceled')).filter((e) => e.target.id === b.id).length, 1, 'the refusal wrote nothing');
  });

  it('shows an automation run waiting on its step, and cancels the run through the API', async function () {
    const created = await t.call('POST', '/api/v1/automations', {
      as: 'admin',
      body: {
        name: 'Nudge <b>me</b>',
        trigger: { event: 'trial' },
        steps: [
          { type: 'wait_for_event', event: 'converted', timeout: 'PT1H' },
          { type: 'update_contact', properties: { nudged: true } },
        ],
      },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.id as string;
    assert.equal((await t.call('POST', '/api/v1/events', { body: { name: 'trial', email: address('trial') } })).status, 200);
    const run = await waitFor(async () => {
      const [r] = (await t.call('GET', `/api/v1/automations/${id}/runs`, { as: 'admin' })).body.data;
      return r?.status === 'waiting' ? r : undefined;
    }, 'a waiting run');
    const list = await c.get(`/console/o/${t.orgId}/automations`);
    assert.equal(list.status, 200);
    assert.ok(list.html.includes(`>Nudge &lt;b&gt;me&lt;/b&gt;</a>`));
    assert.match(list.html, /event trial/);
    const detail = await c.get(`/console/o/${t.orgId}/automations/${id}`);
    assert.equal(detail.status, 200);
    const row = detail.html.split('<tr>').find((r) => r.includes(run.id))!;
    assert.ok(row, 'the run is listed');
    assert.match(row, />waiting</);
    assert.match(flat(row), /<code>steps\[0\]<\/code> wait_for_event — waiting for <code>converted<\/code>/);
    const canceledFilter = await c.get(`/console/o/${t.orgId}/automations/${id}?status=canceled`);
    assert.ok(!canceledFilter.html.includes(run.id), 'the status filter goes to the API');
    const runPage = await c.get(`/console/o/${t.orgId}/automations/${id}/runs/${run.id}`);
    assert.equal(runPage.status, 200);
    assert.match(flat(runPage.html), /<td><code>steps\[0\]<\/code><\/td>\s*<td>wait_for_event<\/td>/);
    assert.match(runPage.html, /in progress/);

    const done = await c.post(`/console/o/${t.orgId}/automations/${id}/runs/${run.id}/cancel`);
    assert.equal(done.status, 303);
    assert.equal(done.location, `/console/o/${t.orgId}/automations/${id}?done=run_canceled`);
    assert.equal((await t.call('GET', `/api/v1/automation-runs/${run.id}`, { as: 'admin' })).body.status, 'canceled');
    const entries = (await auditOf('automation_run.canceled')).filter((e) => e.target.id === run.id);
    assert.deepEqual(
      entries.map((e) => e.actor),
      [`console:${admin.email}`],
    );
    const after = await c.get(done.location!);
    assert.match(after.html, /The run was canceled\./);
    assert.ok(!after.html.includes(`runs/${run.id}/cancel`), 'no cancel for a canceled run');
    const again = await c.post(`/console/o/${t.orgId}/automations/${id}/runs/${run.id}/cancel`);
    assert.equal(again.status, 409);
    assert.equal(alertText(again.html), 'the run is canceled; only running or waiting runs can be canceled');
    // A run named under another automation's path is not found there.
    const stray = await c.get(`/console/o/${t.orgId}/automations/00000000-0000-7000-8000-000000000000/runs/${run.id}`);
    assert.equal(stray.status, 404);
  });

  it('refuses an organization admin another organization: 403, and nothing of it canceled', async function () {
    const theirs = await createBroadcast(other, { name: 'Theirs', scheduled_at: new Date(Date.now() + 3_600_000).toISOString() });
    assert.equal((await c.get(`/console/o/${other.orgId}/broadcasts`)).status, 403);
    assert.equal((await c.get(`/console/o/${other.orgId}/automations`)).status, 403);
    const refused = await c.post(`/console/o/${other.orgId}/broadcasts/${theirs.id}/cancel`);
    assert.equal(refused.status, 403);
    assert.ok(!refused.html.includes('Theirs'));
    assert.equal((await other.call('GET', `/api/v1/broadcasts/${theirs.id}`, { as: 'admin' })).body.status, 'queued');
    // Nor through its own organization's path: the API scopes the id to the organization.
    assert.equal((await c.post(`/console/o/${t.orgId}/broadcasts/${theirs.id}/cancel`)).status, 404);
    assert.equal((await other.call('GET', `/api/v1/broadcasts/${theirs.id}`, { as: 'admin' })).body.status, 'queued');
  });
});
