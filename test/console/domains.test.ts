import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { FlatConsoleClient, newOperator, type OperatorLogin } from '../support/console';

const alertText = (page: string) => /<p class="error" role="alert">([^<]*)<\/p>/.exec(page)?.[1];

/** The row of one record on the detail page, by its purpose. */
const recordRow = (page: string, purpose: string) => new RegExp(`<tr class="record-\\w+"><td>${purpose}[\\s\\S]*?</tr>`).exec(page)?.[0];

/** The domains pages: records against DNS, verify now, the tracking host, warm-up (platform only). */
describe('console: domains', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  let platform: OperatorLogin;
  let admin: OperatorLogin;
  let p: FlatConsoleClient;
  let c: FlatConsoleClient;
  let base: string;

  const domain = async () => (await t.call('GET', `/api/v1/domains/${t.domainId}`, { as: 'admin' })).body;
  const auditOf = async (actor: string, action: string) =>
    (await t.call('GET', `/api/v1/audit-log?actor=${encodeURIComponent(actor)}&action=${action}`, { as: 'admin' })).body.data as any[];

  before(async function () {
    env = await sharedService();
    t = await newTenant(env);
    other = await newTenant(env);
    platform = await newOperator(env, null);
    admin = await newOperator(env, t.orgId);
    p = new FlatConsoleClient(env.url);
    c = new FlatConsoleClient(env.url);
    assert.equal((await p.signIn(platform.email, platform.password)).status, 303);
    assert.equal((await c.signIn(admin.email, admin.password)).status, 303);
    base = `/console/o/${t.orgId}/domains`;
  });

  it('lists the domains with status, stream, tracking host, warm-up stage and today’s use', async function () {
    const page = await c.get(base);
    assert.equal(page.status, 200);
    const row = new RegExp(`<tr><td><a href="${base}/${t.domainId}">${t.domain.replace(/\./g, '\\.')}</a></td>[\\s\\S]*?</tr>`).exec(
      page.html,
    )?.[0];
    assert.ok(row, 'the tenant domain has a row');
    const d = await domain();
    assert.match(row, /verified/);
    assert.match(row, /transactional/);
    assert.match(row, /<td>off<\/td>/);
    assert.ok(row.includes(`${d.warmup.sent_today} <span class="muted">(no cap)</span>`));
  });

  it('sets the tracking host (shown in the API), verifies now, and shows each record’s value beside what DNS holds', async function () {
    const host = `links.${t.domain}`;
    const set = await c.post(`${base}/${t.domainId}/tracking`, { tracking_host: host });
    assert.equal(set.status, 303, alertText(set.html));
    assert.equal(set.location, `${base}/${t.domainId}?done=domain_updated`);
    const d = await domain();
    assert.equal(d.tracking_host, host);
    const record = d.records.find((r: any) => r.purpose === 'tracking');
    assert.equal(record.name, host);
    const [log] = await auditOf(`console:${admin.email}`, 'domain.updated');
    assert.equal(log.key_id, null);
    assert.deepEqual(log.details.changes, { tracking_host: host });

    // DNS points elsewhere: after verify now, the page shows the value to publish beside the observed one, marked as differing.
    env.dns.cname.set(host, 'elsewhere.example.net.');
    const verify = await c.post(`${base}/${t.domainId}/verify`);
    assert.equal(verify.status, 303);
    const after = await domain();
    assert.equal(after.records.find((r: any) => r.purpose === 'tracking').observed, 'elsewhere.example.net');
    let page = await c.get(verify.location!);
    assert.equal(page.status, 200);
    assert.ok(page.html.includes('Verification started'));
    let row = recordRow(page.html, 'tracking')!;
    assert.ok(row.includes(`<td class="mono">${record.value}</td><td class="mono">elsewhere.example.net</td>`), row);
    assert.match(row, /<span class="bad">differs<\/span>/);
    assert.match(page.html, /1 of 1 records differ from DNS/);

    // Published as asked: the same record now matches.
    env.dns.cname.set(host, `${record.value}.`);
    assert.equal((await c.post(`${base}/${t.domainId}/verify`)).status, 303);
    page = await c.get(`${base}/${t.domainId}`);
    row = recordRow(page.html, 'tracking')!;
    assert.ok(row.includes(`<td class="mono">${record.value}</td><td class="mono">${record.value}</td>`), row);
    assert.match(row, /<span class="good">matches<\/span>/);
    assert.match(page.html, /No record differs from DNS/);
    assert.equal((await auditOf(`console:${admin.email}`, 'domain.verify_requested')).length, 2);
  });

  it('shows the API refusal of a tracking host outside the domain and changes nothing', async function () {
    const before = await domain();
    const res = await c.post(`${base}/${t.domainId}/tracking`, { tracking_host: 'links.elsewhere.example' });
    assert.equal(res.status, 422);
    assert.match(alertText(res.html)!, /tracking_host must be a host under/);
    assert.deepEqual(await domain(), before);
  });

  it('lets a platform operator set the warm-up stage (audited under their name) and refuses an organization admin', async function () {
    const admins = await c.get(`${base}/${t.domainId}`);
    assert.ok(!admins.html.includes(`action="${base}/${t.domainId}/warmup"`));
    const refused = await c.post(`${base}/${t.domainId}/warmup`, { stage: '3' });
    assert.equal(refused.status, 403);
    assert.equal((await domain()).warmup.stage, null);

    const set = await p.post(`${base}/${t.domainId}/warmup`, { stage: '3' });
    assert.equal(set.status, 303, alertText(set.html));
    const d = await domain();
    assert.equal(d.warmup.stage, 3);
    assert.equal(d.warmup.daily_limit, 1000);
    const [log] = await auditOf(`console:${platform.email}`, 'domain.warmup_set');
    assert.equal(log.key_id, null);
    assert.deepEqual(log.details, { from: null, to: 3, by: 'operator' });
    const page = await p.get(set.location!);
    assert.ok(page.html.includes('The warm-up stage was set.'));
    assert.match(page.html, /<option value="3" selected>stage 3: 1000 per day<\/option>/);
    assert.ok(page.html.includes(`${d.warmup.sent_today} of 1000`));

    const bad = await p.post(`${base}/${t.domainId}/warmup`, { stage: '9' });
    assert.equal(bad.status, 400);
    assert.equal((await domain()).warmup.stage, 3);
    assert.equal((await p.post(`${base}/${t.domainId}/warmup`, { stage: 'off' })).status, 303);
    assert.equal((await domain()).warmup.stage, null);

    // Another organization's domain under this organization's address: not found, untouched.
    const foreign = await p.post(`${base}/${other.domainId}/warmup`, { stage: '2' });
    assert.equal(foreign.status, 404);
    assert.equal((await other.call('GET', `/api/v1/domains/${other.domainId}`, { as: 'admin' })).body.warmup.stage, null);
  });

  it('lets a platform operator override the domain’s transport (audited, read by delivery) and refuses an organization admin', async function () {
    const transportOf = async () =>
      (await env.service.db.orm.em.fork().getConnection().execute(`select transport from domains where id = ?`, [t.domainId]))[0].transport;
    assert.ok(!(await c.get(`${base}/${t.domainId}`)).html.includes(`action="${base}/${t.domainId}/transport"`));
    assert.equal((await c.post(`${base}/${t.domainId}/transport`, { transport: 'direct' })).status, 403);
    assert.equal(await transportOf(), null);

    const page = await p.get(`${base}/${t.domainId}`);
    assert.match(page.html, /<option value="inherit" selected>the organization's \(relay\)<\/option>/);
    const set = await p.post(`${base}/${t.domainId}/transport`, { transport: 'direct' });
    assert.equal(set.status, 303, alertText(set.html));
    assert.equal(await transportOf(), 'direct');
    const [log] = await auditOf(`console:${platform.email}`, 'domain.transport_set');
    assert.deepEqual(log.details, { from: null, to: 'direct' });
    assert.ok((await p.get(set.location!)).html.includes('The transport was set.'));

    assert.equal((await p.post(`${base}/${t.domainId}/transport`, { transport: 'carrier-pigeon' })).status, 422);
    assert.equal(await transportOf(), 'direct');
    assert.equal((await p.post(`${base}/${other.domainId}/transport`, { transport: 'direct' })).status, 404);
    assert.equal((await p.post(`${base}/${t.domainId}/transport`, { transport: 'inherit' })).status, 303);
    assert.equal(await transportOf(), null);
  });

  it('refuses an organization admin of another organization', async function () {
    const outsider = await newOperator(env, other.orgId);
    const o = new FlatConsoleClient(env.url);
    assert.equal((await o.signIn(outsider.email, outsider.password)).status, 303);
    const list = await o.get(base);
    assert.equal(list.status, 403);
    assert.ok(!list.html.includes(t.domain));
    assert.equal((await o.get(`${base}/${t.domainId}`)).status, 403);
    const before = await domain();
    assert.equal((await o.post(`${base}/${t.domainId}/tracking`, { tracking_host: `x.${t.domain}` })).status, 403);
    assert.deepEqual(await domain(), before);
  });
});
