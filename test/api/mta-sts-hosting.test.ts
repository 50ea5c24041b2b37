import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { Resolver } from 'node:dns/promises';
import pino from 'pino';
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { createDomain } from '../../core/provisioning';
import { createSecrets } from '../../core/secrets';
import { platformDns } from '../../core/domains/identity';
import { mxMatchesPolicy, parseStsPolicy, parseStsRecord } from '../../core/delivery/mta-sts';
import { systemClock } from '../../core/clock';
import { createStsPolicies } from '../../activities/delivery/mta-sts-source';
import { TestCa } from '../support/test-ca';
import { readConfig } from '../../server/config';
import { AuditEntry, type Domain } from '../../db/entities';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { FlatConsoleClient, newOperator } from '../support/console';
import { request } from '../support/http';

/** GET with a chosen Host header (fetch will not send one), as a sender reaches mta-sts.<host> through the CNAME. */
function getAs(base: string, host: string, path: string): Promise<{ status: number; type: string; body: string }> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path, headers: { host } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'] ?? '', body: Buffer.concat(chunks).toString() }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

const today = () => new Date().toISOString().slice(0, 10);
const report = (host: string, id: string, successes: number, failures: number) => ({
  'organization-name': 'Reporter Inc.',
  'date-range': { 'start-datetime': `${today()}T00:00:00Z`, 'end-datetime': `${today()}T23:59:59Z` },
  'contact-info': 'tlsrpt@reporter.example',
  'report-id': id,
  policies: [
    {
      policy: { 'policy-type': 'sts', 'policy-string': ['version: STSv1'], 'policy-domain': host, 'mx-host': ['feedback-smtp.x'] },
      summary: { 'total-successful-session-count': successes, 'total-failure-session-count': failures },
    },
  ],
});

describe('MTA-STS hosting: the policy served on mta-sts.<return-path host>, the console’s mode, TLS-RPT reports', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let t: Tenant;
  let d: Domain;
  let page: string;
  let host: string;
  let p: FlatConsoleClient;
  let c: FlatConsoleClient;
  let rua: string;
  const count = async () =>
    (await env.service.db.orm.em.fork().getConnection().execute(`select count(*)::int as n from tls_rpt_reports where host = ?`, [host]))[0]
      .n as number;
  const post = (path: string, raw: Buffer | string, contentType: string) => request(env.url, 'POST', path, { raw, contentType });
  const hostingRows = async () =>
    (await env.service.db.orm.em.fork().getConnection().execute(`select count(*)::int as n from mta_sts_hosting where host = ?`, [host]))[0]
      .n as number;
  const apiRecords = async () => (await t.call('GET', `/api/v1/domains/${d.id}`, { as: 'admin' })).body.records as any[];

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
    // Pending, with an identity and no verification loop: nothing but this test writes its records.
    const identity = { secrets: createSecrets(randomBytes(32)), platform: platformDns(readConfig({}).platformMailDomain) };
    d = await createDomain(env.service.db.orm, t.orgId, `sts-${Date.now()}.example.test`, { identity });
    host = d.returnPathHost!;
    page = `/console/o/${t.orgId}/domains/${d.id}`;
    p = new FlatConsoleClient(env.url);
    c = new FlatConsoleClient(env.url);
    const platform = await newOperator(env, null);
    const admin = await newOperator(env, t.orgId);
    assert.equal((await p.signIn(platform.email, platform.password)).status, 303);
    assert.equal((await c.signIn(admin.email, admin.password)).status, 303);
  });

  it('serves no policy before the host is hosted, nor for other hosts', async () => {
    for (const h of [`mta-sts.${host}`, host, 'localhost', `mta-sts.bounces.unknown.example.test`]) {
      const r = await getAs(env.url, h, '/.well-known/mta-sts.txt');
      assert.equal(r.status, 404, h);
      assert.equal(JSON.parse(r.body).error.code, 'not_found');
    }
  });

  it('hosts nothing for a pending domain, and a page view writes nothing', async () => {
    const view = await c.get(page);
    assert.equal(view.status, 200);
    assert.match(view.html, /hosted once this domain is verified/);
    assert.ok(!view.html.includes('/.well-known/mta-sts.txt'));
    assert.equal(await hostingRows(), 0, 'no hosting row from a view');
    assert.deepEqual(
      (await apiRecords()).filter((r) => ['mta_sts_host', 'mta_sts', 'tls_rpt'].includes(r.purpose)),
      [],
    );
    const asked = await c.post(`${page}/mta-sts/host`);
    assert.equal(asked.status, 409, 'nor on request while it is pending');
    assert.equal(await hostingRows(), 0);
  });

  it('hosts the policy once a check verifies the domain; the records join the domain’s, optional: the domain verifies without them', async () => {
    // Only the identity records in DNS: the domain verifies, and its hosting is made then.
    for (const r of (await apiRecords()).filter((x) => x.required)) {
      if (r.type === 'MX') env.dns.mx.set(r.name, [{ priority: 10, exchange: r.value.split(' ')[1] }]);
      else env.dns.txt.set(r.name, [...(env.dns.txt.get(r.name) ?? []), r.value]);
    }
    const verified = await t.call('POST', `/api/v1/domains/${d.id}/verify`, { as: 'admin' });
    assert.equal(verified.body.status, 'verified');
    assert.equal(await hostingRows(), 1);
    const [hosted] = await env.service.db.orm.em.fork().find(AuditEntry, { targetId: d.id, action: 'domain.mta_sts_hosted' });
    assert.equal(hosted!.actor, null, 'made by the check (the system)');
    const view = await c.get(page);
    assert.equal(view.status, 200);
    assert.match(view.html, /<h2 id="mta-sts">MTA-STS<\/h2>/);
    assert.ok(view.html.includes(`https://mta-sts.${host}/.well-known/mta-sts.txt`));
    assert.match(view.html, /Only a platform operator can change the MTA-STS mode/);
    const records = await apiRecords();
    const mine = records.filter((r) => ['mta_sts_host', 'mta_sts', 'tls_rpt'].includes(r.purpose));
    assert.deepEqual(
      mine.map((r) => [r.type, r.name, r.required]),
      [
        ['CNAME', `mta-sts.${host}`, false],
        ['TXT', `_mta-sts.${host}`, false],
        ['TXT', `_smtp._tls.${host}`, false],
      ],
    );
    // PUBLIC_URL unset: links and this record name http://localhost:PORT.
    assert.equal(mine[0].value, 'localhost');
    rua = /rua=(https:\/\/\S+)$/.exec(mine[2].value)![1];
    assert.match(rua, /\/tlsrpt\/[0-9a-f]{32}$/);
    // Checked again: still verified, the MTA-STS records (not in DNS) show as missing.
    const again = await t.call('POST', `/api/v1/domains/${d.id}/verify`, { as: 'admin' });
    assert.equal(again.body.status, 'verified');
    assert.deepEqual(
      again.body.records.filter((r: any) => !r.required && r.purpose !== 'dmarc').map((r: any) => r.status),
      ['missing', 'missing', 'missing'],
    );
  });

  it('serves the policy on mta-sts.<host> as text/plain, read by a sender’s parser as testing with the return path’s MX', async () => {
    const r = await getAs(env.url, `MTA-STS.${host.toUpperCase()}:443`, '/.well-known/mta-sts.txt');
    assert.equal(r.status, 200);
    assert.match(r.type, /^text\/plain/);
    assert.match(r.body, /^version: STSv1\r\nmode: testing\r\nmx: feedback-smtp\.[^\r]+\r\nmax_age: 86400\r\n$/);
    const txt = (await apiRecords()).find((x) => x.purpose === 'mta_sts').value;
    const id = parseStsRecord([txt])!.id;
    const policy = parseStsPolicy(id, r.body);
    assert.ok(!('error' in policy), JSON.stringify(policy));
    const mx = d.records.find((x) => x.purpose === 'return_path_mx')!.value.split(' ')[1];
    assert.deepEqual(policy, { id, mode: 'testing', mx: [mx], maxAgeSeconds: 86_400 });
  });

  it('lets only a platform operator move the mode: a new id each time, audited as console:<email>', async () => {
    const before = (await apiRecords()).find((x) => x.purpose === 'mta_sts').value;
    const refused = await c.post(`${page}/mta-sts/mode`, { mode: 'enforce' });
    assert.equal(refused.status, 403);
    assert.equal((await apiRecords()).find((x) => x.purpose === 'mta_sts').value, before);
    const view = await p.get(page);
    assert.match(view.html, /Move the policy to enforce/);
    const bad = await p.post(`${page}/mta-sts/mode`, { mode: 'none' });
    assert.equal(bad.status, 422);
    const moved = await p.post(`${page}/mta-sts/mode`, { mode: 'enforce' });
    assert.equal(moved.status, 303);
    assert.equal(moved.location, `${page}?done=mta_sts_mode_set#mta-sts`);
    const after = (await apiRecords()).find((x) => x.purpose === 'mta_sts').value;
    assert.notEqual(after, before);
    const served = await getAs(env.url, `mta-sts.${host}`, '/.well-known/mta-sts.txt');
    const enforced = parseStsPolicy(parseStsRecord([after])!.id, served.body);
    assert.ok(!('error' in enforced) && enforced.mode === 'enforce' && enforced.maxAgeSeconds === 604_800, served.body);
    const audit = await env.service.db.orm.em.fork().find(AuditEntry, { targetId: d.id, action: 'domain.mta_sts_mode_set' });
    assert.equal(audit.length, 1);
    assert.ok(audit[0].actor?.startsWith('console:op-'));
    assert.deepEqual(audit[0].details, { host, from: 'testing', to: 'enforce', policy_id: parseStsRecord([after])!.id });
    assert.equal((await p.post(`${page}/mta-sts/mode`, { mode: 'enforce' })).location, `${page}?done=mta_sts_mode_unchanged#mta-sts`);
    assert.equal((await p.post(`${page}/mta-sts/mode`, { mode: 'testing' })).status, 303);
    assert.notEqual((await apiRecords()).find((x) => x.purpose === 'mta_sts').value, after);
  });

  it('ingests TLS-RPT reports (JSON and gzip) once each, and shows the counts per day on the domain page', async () => {
    const path = new URL(rua).pathname;
    const json = await post(path, JSON.stringify(report(host, 'r-1', 120, 3)), 'application/tlsrpt+json');
    assert.equal(json.status, 201, JSON.stringify(json.body));
    const again = await post(path, JSON.stringify(report(host, 'r-1', 120, 3)), 'application/tlsrpt+json');
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, { stored: false, duplicate: true });
    const gz = await post(path, gzipSync(JSON.stringify(report(`${host.toUpperCase()}.`, 'r-2', 30, 0))), 'application/tlsrpt+gzip');
    assert.equal(gz.status, 201, JSON.stringify(gz.body));
    assert.equal(await count(), 2);
    const view = await p.get(page);
    assert.ok(
      view.html.includes(
        `<td>${today()}</td><td class="num">2</td><td class="num">150</td><td class="num"><span class="bad">3</span></td>`,
      ),
      view.html.slice(view.html.indexOf('TLS reports')),
    );
  });

  it('shows a same-named pending domain of another organization nothing of the host: no policy, no report counts', async () => {
    const other = await newTenant(env);
    const identity = { secrets: createSecrets(randomBytes(32)), platform: platformDns(readConfig({}).platformMailDomain) };
    const twin = await createDomain(env.service.db.orm, other.orgId, d.name, { identity });
    assert.equal(twin.returnPathHost, host, 'the same return-path host');
    const op = await newOperator(env, other.orgId);
    const oc = new FlatConsoleClient(env.url);
    assert.equal((await oc.signIn(op.email, op.password)).status, 303);
    const view = await oc.get(`/console/o/${other.orgId}/domains/${twin.id}`);
    assert.equal(view.status, 200);
    assert.match(view.html, /hosted once this domain is verified/);
    assert.ok(!view.html.includes('TLS reports received'), 'no TLS report counts');
    assert.ok(!view.html.includes('/.well-known/mta-sts.txt'));
    assert.equal((await oc.post(`/console/o/${other.orgId}/domains/${twin.id}/mta-sts/host`)).status, 409);
    assert.equal(
      (await env.service.db.orm.em.fork().find(AuditEntry, { targetId: twin.id })).filter((a) => a.action.startsWith('domain.mta_sts'))
        .length,
      0,
    );
  });

  it('refuses what is not a report for this host without storing anything: bombs, oversize, wrong type, unknown address', async () => {
    const path = new URL(rua).pathname;
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024, 0x20));
    assert.ok(bomb.length < 1024 * 1024, 'the bomb itself is small');
    const cases: [string, Buffer | string, string, number, string][] = [
      ['gzip bomb', bomb, 'application/tlsrpt+gzip', 413, 'payload_too_large'],
      ['oversize', Buffer.alloc(1024 * 1024 + 1, 0x20), 'application/tlsrpt+json', 413, 'payload_too_large'],
      ['not gzip', 'plain text', 'application/tlsrpt+gzip', 400, 'invalid_body'],
      ['not JSON', gzipSync('{"a":'), 'application/tlsrpt+gzip', 400, 'invalid_json'],
      ['JSON type', JSON.stringify(report(host, 'r-3', 1, 1)), 'application/json', 415, 'unsupported_media_type'],
      ['another domain', JSON.stringify(report('bounces.other.example', 'r-4', 1, 1)), 'application/tlsrpt+json', 422, 'validation_error'],
      ['not a report', '{"policies":[]}', 'application/tlsrpt+json', 422, 'validation_error'],
    ];
    for (const [name, body, type, status, code] of cases) {
      const r = await post(path, body, type);
      assert.equal(r.status, status, name);
      assert.equal(r.body.error.code, code, name);
    }
    const unknown = await post(`/tlsrpt/${'0'.repeat(32)}`, JSON.stringify(report(host, 'r-5', 1, 1)), 'application/tlsrpt+json');
    assert.equal(unknown.status, 404);
    assert.equal(await count(), 2);
  });

  it('is what a sender’s MTA-STS source fetches over HTTPS through a TLS-terminating proxy (the deployment docs/domains.md describes)', async () => {
    const ca = await TestCa.create();
    const target = new URL(env.url);
    // The proxy in front: TLS for mta-sts.<host>, then the request as it came, Host included.
    const proxy = https.createServer(await ca.issue([`mta-sts.${host}`]), (req, res) => {
      const up = http.request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
        (r) => {
          res.writeHead(r.statusCode ?? 502, r.headers);
          r.pipe(res);
        },
      );
      req.pipe(up);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    try {
      const txt = (await apiRecords()).find((x) => x.purpose === 'mta_sts').value;
      env.dns.txt.set(`_mta-sts.${host}`, [txt]);
      env.dns.a.set(`mta-sts.${host}`, ['127.0.0.1']);
      const resolver = new Resolver();
      resolver.setServers([`127.0.0.1:${env.dns.port}`]);
      const sts = createStsPolicies({
        orm: env.service.db.orm,
        dns: resolver,
        clock: systemClock,
        log: pino({ level: 'silent' }),
        allowPrivate: true,
        ca: [ca.caPem],
        httpsPort: (proxy.address() as AddressInfo).port,
        memoMs: 0,
      });
      const mx = d.records.find((x) => x.purpose === 'return_path_mx')!.value.split(' ')[1];
      const policy = await sts.policyFor(host);
      assert.deepEqual(policy, { id: parseStsRecord([txt])!.id, mode: 'testing', mx: [mx], maxAgeSeconds: 86_400 });
      assert.ok(mxMatchesPolicy(policy!, mx));
    } finally {
      proxy.close();
    }
  });

  it('stops serving the policy and taking reports once the domain is deleted', async () => {
    assert.equal((await t.call('DELETE', `/api/v1/domains/${d.id}`, { as: 'admin' })).status, 200);
    assert.equal((await getAs(env.url, `mta-sts.${host}`, '/.well-known/mta-sts.txt')).status, 404);
    const r = await post(new URL(rua).pathname, JSON.stringify(report(host, 'r-6', 1, 1)), 'application/tlsrpt+json');
    assert.equal(r.status, 404);
  });
});
