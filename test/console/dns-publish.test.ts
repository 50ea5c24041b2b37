import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { FlatConsoleClient, newOperator, type OperatorLogin } from '../support/console';
import { MANAGED_COMMENT } from '../../core/dns-publish/rules';
import { insertPendingKey } from '../../db/sql/dkim-keys';
import { uuidv7 } from '../../db/ids';

const alertText = (page: string) => /<p class="error" role="alert">([^<]*)<\/p>/.exec(page)?.[1];

/** The publication row of one record on the domain page, by its purpose. */
const row = (page: string, purpose: string) => new RegExp(`<tr class="publication-(\\w+)"><td>${purpose}</td>[\\s\\S]*?</tr>`).exec(page);

/**
 * Publishing a domain's records to Cloudflare from the console, through the shared service whose
 * SDK calls the local Cloudflare-compatible API (CLOUDFLARE_API_BASE_URL) whose zone TestDns serves.
 */
describe('console: publishing DNS records to Cloudflare', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let t: Tenant;
  let platform: OperatorLogin;
  let p: FlatConsoleClient;
  let c: FlatConsoleClient;
  let org: string;
  let page: string;
  let token: string;
  let name: string;
  let domainId: string;

  const domain = async () => (await t.call('GET', `/api/v1/domains/${domainId}`, { as: 'admin' })).body;
  const audit = async (action: string) =>
    (await t.call('GET', `/api/v1/audit-log?action=${action}`, { as: 'admin' })).body.data as {
      actor: string;
      details: Record<string, any>;
    }[];
  const writes = () => env.cloudflare.requests.filter((r) => r.method !== 'GET').length;

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
    platform = await newOperator(env, null);
    const admin = await newOperator(env, t.orgId);
    p = new FlatConsoleClient(env.url);
    c = new FlatConsoleClient(env.url);
    assert.equal((await p.signIn(platform.email, platform.password)).status, 303);
    assert.equal((await c.signIn(admin.email, admin.password)).status, 303);
    org = `/console/organizations/${t.orgId}`;
    // A domain made through the API has its identity's records (DKIM, return path MX and SPF, DMARC), not yet in DNS.
    name = `pub-${Date.now()}.example.test`;
    const made = await t.call('POST', '/api/v1/domains', { as: 'admin', body: { name } });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    domainId = made.body.id;
    page = `/console/o/${t.orgId}/domains/${domainId}`;
    env.cloudflare.addZone(name);
    token = env.cloudflare.addToken();
    const set = await t.call('PATCH', `/api/v1/domains/${domainId}`, { as: 'admin', body: { tracking_host: `links.${name}` } });
    assert.equal(set.status, 200);
  });

  it('publishes only for an internal organization, and takes a token only once it is internal', async () => {
    assert.match((await p.get(page)).html, /Only an internal organization publishes to Cloudflare/);
    const before = writes();
    const refused = await p.post(`${page}/dns-publish`);
    assert.equal(refused.status, 409);
    assert.equal(alertText(refused.html), 'Only an internal organization publishes DNS records.');
    const attach = await p.post(`${org}/cloudflare`, { token });
    assert.equal(attach.status, 422);
    assert.equal(writes(), before);
    assert.deepEqual(await audit('domain.dns_published'), []);

    const marked = await p.post(`${org}/internal`, { internal: 'yes' });
    assert.equal(marked.status, 303, alertText(marked.html));
    assert.equal(marked.location, `${org}?done=internal_set`);
    const [entry] = await audit('organization.internal_set');
    assert.equal(entry.actor, `console:${platform.email}`);
    assert.deepEqual(entry.details, { from: false, to: true });
  });

  it('checks a token with Cloudflare before keeping it, stores it sealed, and never shows it again', async () => {
    const readOnly = env.cloudflare.addToken(['#zone:read', '#dns_records:read']);
    const refused = await p.post(`${org}/cloudflare`, { token: readOnly });
    assert.equal(refused.status, 422);
    assert.match(alertText(refused.html)!, /needs DNS Edit/);
    assert.ok(!refused.html.includes(readOnly));

    const attached = await p.post(`${org}/cloudflare`, { token });
    assert.equal(attached.status, 303, alertText(attached.html));
    const shown = await p.get(org);
    assert.ok(!shown.html.includes(token), 'the organization page never shows the token');
    const id = env.cloudflare.tokens.get(token)!.id;
    assert.ok(shown.html.includes(`<code>${id}</code>`));
    const [stored] = await env.service.db.orm.em
      .fork()
      .execute(`select token_enc from cloudflare_connections where organization_id = ?`, [t.orgId]);
    assert.ok(!stored.token_enc.includes(token));
    const [entry] = await audit('organization.cloudflare_attached');
    assert.equal(entry.actor, `console:${platform.email}`);
    // The local API's token sees every zone the suite made so far; this test's is among them.
    assert.equal(entry.details.token_id, id);
    assert.ok((entry.details.zones as string[]).includes(name), 'the zones the token may edit');
    assert.ok(!JSON.stringify(await audit('organization.cloudflare_attached')).includes(token));
  });

  it('publishes DKIM, return path and tracking records, leaves a DMARC record it did not create alone, and DNS answers them', async () => {
    const theirs = env.cloudflare.seed(name, { type: 'TXT', name: `_dmarc.${name}`, content: 'v=DMARC1; p=reject' });
    const only = await c.post(`${page}/dns-publish`);
    assert.equal(only.status, 403, 'an organization operator does not publish');

    const published = await p.post(`${page}/dns-publish`);
    assert.equal(published.status, 303, alertText(published.html));
    assert.equal(published.location, `${page}?done=dns_published`);
    const d = await domain();
    assert.equal(d.status, 'verified', 'domain verification sees what was published');
    // Whatever else the domain asks for (MTA-STS, TLS-RPT when hosted) is published the same way.
    const purposes = d.records.map((r: any) => r.purpose);
    for (const purpose of ['dkim', 'dmarc', 'return_path_mx', 'return_path_spf', 'tracking'])
      assert.ok(purposes.includes(purpose), purpose);
    for (const r of d.records.filter((x: any) => x.purpose !== 'dmarc')) {
      const held = env.cloudflare.records(r.name).filter((x) => x.type === r.type);
      assert.equal(held.length, 1, `${r.purpose}: one ${r.type} at ${r.name}`);
      assert.equal(held[0].comment, MANAGED_COMMENT);
      assert.equal(r.status, 'verified', `${r.purpose} resolves and the domain's own check agrees`);
    }
    assert.deepEqual(env.cloudflare.records(`_dmarc.${name}`), [theirs], 'never a second DMARC record, and theirs untouched');

    const shown = (await p.get(page)).html;
    for (const purpose of ['dkim', 'return_path_mx', 'return_path_spf', 'tracking'])
      assert.equal(row(shown, purpose)?.[1], 'verified', purpose);
    assert.equal(row(shown, 'dmarc')?.[1], 'conflict');
    assert.match(row(shown, 'dmarc')![0], /a record the service did not create holds the name: TXT v=DMARC1; p=reject/);
    // Two publishes: the domain's records, then the MTA-STS records its verification (by the first) hosted.
    const entries = await audit('domain.dns_published');
    assert.equal(entries.length, 2);
    assert.ok(entries.every((e) => e.actor === `console:${platform.email}`));
    assert.deepEqual(entries[0].details.records.map((r: any) => r.purpose).sort(), ['mta_sts', 'mta_sts_host', 'tls_rpt']);
    assert.deepEqual(
      entries.flatMap((e) => e.details.records.map((r: any) => `${r.purpose}:${r.action}`)).sort(),
      d.records.map((r: any) => `${r.purpose}:${r.purpose === 'dmarc' ? 'conflict' : 'create'}`).sort(),
    );
  });

  it('publishes again without writing anything when the zone already holds the records', async () => {
    const before = writes();
    assert.equal((await p.post(`${page}/dns-publish`)).status, 303);
    assert.equal(writes(), before);
    const [entry] = await audit('domain.dns_published');
    assert.ok(entry.details.records.filter((r: any) => r.purpose !== 'dmarc').every((r: any) => r.action === 'unchanged'));
  });

  it('puts back a record of its own that changed, shows it pending until DNS answers, then verified', async () => {
    const host = `links.${name}`;
    const cname = env.cloudflare.records(host)[0];
    cname.content = 'elsewhere.example.test';
    env.dns.servfail.add(host);
    try {
      assert.equal((await p.post(`${page}/dns-publish`)).status, 303);
      assert.equal(env.cloudflare.records(host)[0].content, `track.mail.svc.test`);
      assert.equal(row((await p.get(page)).html, 'tracking')?.[1], 'pending');
    } finally {
      env.dns.servfail.delete(host);
    }
    const checked = await p.post(`${page}/dns-publish/check`);
    assert.equal(checked.status, 303);
    assert.equal(checked.location, `${page}?done=dns_checked`);
    assert.equal(row((await p.get(page)).html, 'tracking')?.[1], 'verified');
  });

  it("publishes a DKIM rotation's pending key beside the active one, so the rotation's checks find it", async () => {
    const selector = `rot${Date.now()}`;
    const publicKey = Buffer.from('not a real key, only its record').toString('base64');
    await env.service.db.orm.em
      .fork()
      .transactional((em) =>
        insertPendingKey(em, { id: uuidv7(), domainId, selector, publicKey, privateKeyEnc: 'sealed', now: new Date() }),
      );
    assert.equal((await p.post(`${page}/dns-publish`)).status, 303);
    const [held] = env.cloudflare.records(`${selector}._domainkey.${name}`);
    assert.equal(held.content, `v=DKIM1; k=rsa; p=${publicKey}`);
    assert.equal(held.comment, MANAGED_COMMENT);
    assert.deepEqual(env.dns.txt.get(`${selector}._domainkey.${name}`), [held.content]);
    const shown = (await p.get(page)).html;
    assert.equal(row(shown, 'dkim_pending')?.[1], 'verified');
    assert.equal(row(shown, 'dkim')?.[1], 'verified', 'the active key stays published');
  });

  it('refuses to publish once the token is detached, writing nothing', async () => {
    assert.equal((await p.post(`${org}/cloudflare/detach`)).status, 303);
    const [entry] = await audit('organization.cloudflare_detached');
    assert.equal(entry.actor, `console:${platform.email}`);
    const before = writes();
    const refused = await p.post(`${page}/dns-publish`);
    assert.equal(refused.status, 409);
    assert.equal(alertText(refused.html), 'The organization has no Cloudflare token attached.');
    assert.equal(writes(), before);
  });
});
