import assert from 'node:assert/strict';
import { Resolver } from 'node:dns/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import pino from 'pino';
import { createStsPolicies, type StsPolicies } from '../../activities/delivery/mta-sts-source';
import type { Orm } from '../../db/orm';
import { listTlsCounts, readPolicy } from '../../db/sql/mta-sts';
import { openTestDb } from '../support/db-fixtures';
import { TestDns } from '../support/dns';
import { TestCa, type Issued } from '../support/test-ca';

/** What the policy host of one domain answers. */
interface Served {
  status: number;
  body: string;
  headers?: Record<string, string>;
}

const POLICY_IP = '127.0.0.41';
const policyText = (mode: string, mx: string[], maxAge: number) =>
  ['version: STSv1', `mode: ${mode}`, ...mx.map((m) => `mx: ${m}`), `max_age: ${maxAge}`, ''].join('\r\n');

describe('activities/delivery/mta-sts-source: MTA-STS policies (RFC 8461) fetched, cached and counted', function () {
  let orm: Orm;
  let ca: TestCa;
  const dns = new TestDns();
  const resolver = new Resolver();
  const served = new Map<string, Served>();
  const certs = new Map<string, tls.SecureContext>();
  const hits = new Map<string, number>();
  let server: https.Server;
  let port: number;
  const clock = { t: new Date('2031-03-01T10:00:00Z'), now: () => new Date(clock.t) };
  const advance = (seconds: number) => (clock.t = new Date(clock.t.getTime() + seconds * 1000));
  let seq = 0;

  before(async () => {
    [orm, ca] = await Promise.all([openTestDb('mta_sts_source'), TestCa.create()]);
    resolver.setServers([await dns.start()]);
    server = https.createServer(
      {
        // Each policy host presents the certificate its test gave it.
        SNICallback: (name, cb) => cb(null, certs.get(name.toLowerCase())),
      },
      (req, res) => {
        const host = (req.headers.host ?? '').split(':')[0];
        hits.set(host, (hits.get(host) ?? 0) + 1);
        const s = served.get(host);
        if (!s || req.url !== '/.well-known/mta-sts.txt') return res.writeHead(404).end();
        res.writeHead(s.status, { 'content-type': 'text/plain', ...s.headers }).end(s.body);
      },
    );
    await new Promise<void>((resolve) => server.listen(0, POLICY_IP, resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.close();
    await dns.stop();
    await orm.close();
  });

  function source(over: { allowPrivate?: boolean; ca?: string[]; memoMs?: number } = {}): StsPolicies {
    return createStsPolicies({
      // Each lookup goes to DNS and the database here; the in-process memo has its own test below.
      memoMs: over.memoMs ?? 0,
      orm,
      dns: resolver,
      clock,
      log: pino({ level: 'silent' }),
      allowPrivate: over.allowPrivate ?? true,
      ca: over.ca ?? [ca.caPem],
      httpsPort: port,
    });
  }

  /** A fresh recipient domain whose `_mta-sts` TXT names `id` and whose policy host serves `body`. */
  async function publish(id: string, body: string, cert?: (host: string) => Promise<Issued>): Promise<string> {
    const domain = `d${++seq}.sts.test`;
    const host = `mta-sts.${domain}`;
    dns.txt.set(`_mta-sts.${domain}`, [`v=STSv1; id=${id};`]);
    dns.a.set(host, [POLICY_IP]);
    const issued = await (cert ?? ((h) => ca.issue([h])))(host);
    certs.set(host, tls.createSecureContext(issued));
    served.set(host, { status: 200, body });
    return domain;
  }
  const hitsOf = (domain: string) => hits.get(`mta-sts.${domain}`) ?? 0;

  describe('fetching and caching', () => {
    it('fetches the policy the TXT announces, then answers from PostgreSQL without HTTPS, also after a restart', async () => {
      const d = await publish('20310301', policyText('enforce', ['mx1.example.net', '*.mx.example.net'], 86400));
      const want = { id: '20310301', mode: 'enforce', mx: ['mx1.example.net', '*.mx.example.net'], maxAgeSeconds: 86400 };
      assert.deepEqual(await source().policyFor(d), want);
      assert.equal(hitsOf(d), 1);
      const s = source();
      assert.deepEqual(await s.policyFor(d), want);
      assert.deepEqual(await s.policyFor(d.toUpperCase() + '.'), want);
      assert.equal(hitsOf(d), 1);
      const row = await readPolicy(orm, d);
      assert.equal(row?.expiresAt.getTime(), clock.now().getTime() + 86400_000);
      assert.equal(row?.error, null);
    });

    it('concurrent attempts to one domain share one fetch', async () => {
      const d = await publish('c1', policyText('testing', ['mx.example.net'], 600));
      const s = source();
      const all = await Promise.all(Array.from({ length: 20 }, () => s.policyFor(d)));
      assert.ok(all.every((p) => p?.mode === 'testing'));
      assert.equal(hitsOf(d), 1);
    });

    it('a new id in the TXT fetches the policy again', async () => {
      const d = await publish('v1', policyText('testing', ['mx.example.net'], 86400));
      const s = source();
      assert.equal((await s.policyFor(d))?.mode, 'testing');
      dns.txt.set(`_mta-sts.${d}`, ['v=STSv1; id=v2']);
      served.set(`mta-sts.${d}`, { status: 200, body: policyText('enforce', ['mx.example.net'], 86400) });
      const p = await s.policyFor(d);
      assert.equal(p?.id, 'v2');
      assert.equal(p?.mode, 'enforce');
      assert.equal(hitsOf(d), 2);
    });

    it('an expired policy (max_age passed) is fetched again under the same id', async () => {
      const d = await publish('same', policyText('enforce', ['mx.example.net'], 3600));
      const s = source();
      await s.policyFor(d);
      advance(3599);
      await s.policyFor(d);
      assert.equal(hitsOf(d), 1);
      served.set(`mta-sts.${d}`, { status: 200, body: policyText('enforce', ['mx2.example.net'], 3600) });
      advance(2);
      assert.deepEqual((await s.policyFor(d))?.mx, ['mx2.example.net']);
      assert.equal(hitsOf(d), 2);
    });

    it('mode none is returned as such', async () => {
      const d = await publish('off', policyText('none', [], 86400));
      assert.deepEqual(await source().policyFor(d), { id: 'off', mode: 'none', mx: [], maxAgeSeconds: 86400 });
    });

    it('no TXT record (or one that does not parse): no policy, and no HTTPS', async () => {
      const d = await publish('x', policyText('enforce', ['mx.example.net'], 86400));
      dns.txt.delete(`_mta-sts.${d}`);
      assert.equal(await source().policyFor(d), null);
      dns.txt.set(`_mta-sts.${d}`, ['v=STSv1; id=a', 'v=STSv1; id=b']);
      assert.equal(await source().policyFor(d), null);
      assert.equal(hitsOf(d), 0);
    });

    it('refresh fetches now even while the cached policy is current', async () => {
      const d = await publish('r1', policyText('testing', ['mx.example.net'], 86400));
      const s = source();
      await s.policyFor(d);
      served.set(`mta-sts.${d}`, { status: 200, body: policyText('enforce', ['mx.example.net'], 86400) });
      assert.equal((await s.refresh(d))?.mode, 'enforce');
      assert.equal(hitsOf(d), 2);
      assert.equal((await s.policyFor(d))?.mode, 'enforce');
    });
  });

  describe('what the fetch refuses', () => {
    async function refused(d: string, s = source()): Promise<string> {
      assert.equal(await s.policyFor(d), null);
      const row = await readPolicy(orm, d);
      assert.equal(row?.policyId, null);
      assert.ok(row?.error);
      return row.error;
    }

    it('a redirect is not followed', async () => {
      const d = await publish('r', '');
      const target = await publish('r', policyText('enforce', ['mx.example.net'], 86400));
      served.set(`mta-sts.${d}`, { status: 301, body: '', headers: { location: `https://mta-sts.${target}/.well-known/mta-sts.txt` } });
      assert.match(await refused(d), /redirect/);
      assert.equal(hitsOf(target), 0);
    });

    it('a non-2xx answer, a policy over 64 KiB and a policy that does not parse', async () => {
      const d404 = await publish('n', '');
      served.set(`mta-sts.${d404}`, { status: 404, body: 'no' });
      assert.match(await refused(d404), /404/);
      const big = await publish('b', policyText('enforce', ['mx.example.net'], 86400) + `x-pad: ${'a'.repeat(70_000)}\r\n`);
      assert.match(await refused(big), /64 KiB/);
      const bad = await publish('p', 'version: STSv1\r\nmode: enforce\r\nmax_age: 60\r\n');
      assert.match(await refused(bad), /no mx/);
    });

    it('a certificate from an untrusted issuer, or for another name', async () => {
      const policy = policyText('enforce', ['mx.example.net'], 86400);
      const untrusted = await publish('u', policy, (h) => TestCa.untrusted([h]));
      assert.match(await refused(untrusted), /SELF_SIGNED|UNABLE_TO_VERIFY/);
      const other = await publish('o', policy, () => ca.issue(['mta-sts.elsewhere.test']));
      assert.match(await refused(other), /ALTNAME/);
      assert.equal(hitsOf(untrusted) + hitsOf(other), 0);
      // Without the test CA among the roots, a refresh fails too, and the cached policy stays.
      const ok = await publish('t', policy);
      assert.equal((await source().policyFor(ok))?.mode, 'enforce');
      assert.equal((await source({ ca: [] }).refresh(ok))?.mode, 'enforce');
      assert.match((await readPolicy(orm, ok))?.error ?? '', /UNABLE_TO_VERIFY|SELF_SIGNED/);
    });

    it('a policy host on a loopback or private address, unless allowPrivate', async () => {
      const d = await publish('l', policyText('enforce', ['mx.example.net'], 86400));
      assert.match(await refused(d, source({ allowPrivate: false })), /private/);
      assert.equal(hitsOf(d), 0);
      dns.a.delete(`mta-sts.${d}`);
      dns.aaaa.set(`mta-sts.${d}`, ['::1']);
      assert.match(await refused(d, source({ allowPrivate: false })), /private/);
      dns.aaaa.delete(`mta-sts.${d}`);
      dns.a.set(`mta-sts.${d}`, [POLICY_IP]);
      assert.equal((await source().policyFor(d))?.mode, 'enforce');
    });
  });

  describe('a cached policy outlives failures until its max_age', () => {
    it('the TXT gone (or DNS failing): the cached policy applies until it expires, then none', async () => {
      const d = await publish('g', policyText('enforce', ['mx.example.net'], 3600));
      const s = source();
      await s.policyFor(d);
      dns.txt.delete(`_mta-sts.${d}`);
      assert.equal((await s.policyFor(d))?.id, 'g');
      dns.servfail.add(`_mta-sts.${d}`);
      assert.equal((await s.policyFor(d))?.id, 'g');
      advance(3601);
      assert.equal(await s.policyFor(d), null);
      assert.equal(hitsOf(d), 1);
    });

    it('a failed fetch of a new id keeps the valid policy (with the error beside it), and is not retried for every message', async () => {
      const d = await publish('k1', policyText('enforce', ['mx.example.net'], 86400));
      const s = source();
      await s.policyFor(d);
      dns.txt.set(`_mta-sts.${d}`, ['v=STSv1; id=k2']);
      served.set(`mta-sts.${d}`, { status: 500, body: '' });
      assert.equal((await s.policyFor(d))?.id, 'k1');
      assert.equal((await s.policyFor(d))?.id, 'k1');
      assert.equal(hitsOf(d), 2);
      const row = await readPolicy(orm, d);
      assert.equal(row?.policyId, 'k1');
      assert.equal(row?.mode, 'enforce');
      assert.match(row?.error ?? '', /500/);
      served.set(`mta-sts.${d}`, { status: 200, body: policyText('testing', ['mx.example.net'], 86400) });
      assert.equal((await s.refresh(d))?.id, 'k2', 'refresh does not wait');
      assert.equal((await readPolicy(orm, d))?.error, null);
    });

    it('after the wait, a failed id is fetched again', async () => {
      const d = await publish('w1', '');
      served.set(`mta-sts.${d}`, { status: 503, body: '' });
      const s = source();
      assert.equal(await s.policyFor(d), null);
      assert.equal(await s.policyFor(d), null);
      assert.equal(hitsOf(d), 1);
      served.set(`mta-sts.${d}`, { status: 200, body: policyText('enforce', ['mx.example.net'], 86400) });
      advance(301);
      assert.equal((await s.policyFor(d))?.mode, 'enforce');
    });
  });

  describe('TLS-RPT counts', () => {
    it('counts per policy domain and UTC day, added to what is stored at each flush', async () => {
      clock.t = new Date('2031-04-10T23:59:00Z');
      const s = source();
      s.report('a.rpt.test', true);
      s.report('a.rpt.test', true);
      s.report('A.rpt.test.', false);
      s.report('b.rpt.test', false);
      await s.flush();
      clock.t = new Date('2031-04-11T00:01:00Z');
      s.report('a.rpt.test', true);
      await s.flush();
      await s.flush();
      s.report('a.rpt.test', false);
      await s.flush();
      const rows = await listTlsCounts(orm, { from: '2031-04-10', to: '2031-04-11', limit: 10 });
      assert.deepEqual(rows, [
        { policy_domain: 'a.rpt.test', day: '2031-04-11', successes: 1, failures: 1 },
        { policy_domain: 'a.rpt.test', day: '2031-04-10', successes: 2, failures: 1 },
        { policy_domain: 'b.rpt.test', day: '2031-04-10', successes: 0, failures: 1 },
      ]);
      assert.deepEqual(await listTlsCounts(orm, { from: '2031-04-11', to: '2031-04-30', limit: 10 }), [rows[0]]);
      assert.equal((await listTlsCounts(orm, { from: '2031-04-10', to: '2031-04-11', limit: 2 })).length, 2);
    });
  });

  it('keeps an answer in the process for a minute: a burst to one domain looks it up once, a re-check at most once', async () => {
    const d = await publish('m1', policyText('enforce', ['mx.example.net'], 86400));
    const s = source({ memoMs: 60_000 });
    assert.equal((await s.policyFor(d))?.id, 'm1');
    dns.txt.set(`_mta-sts.${d}`, ['v=STSv1; id=m2']);
    served.set(`mta-sts.${d}`, { status: 200, body: policyText('enforce', ['mx2.example.net'], 86400) });
    assert.equal((await s.policyFor(d))?.id, 'm1', 'within the minute: the kept answer');
    assert.equal((await s.refresh(d))?.id, 'm2', 'a re-check looks again');
    assert.equal((await s.refresh(d))?.id, 'm2');
    assert.equal(hitsOf(d), 2, 'one fetch each: the first lookup and the one re-check');
    advance(60);
    assert.equal((await s.policyFor(d))?.id, 'm2');
  });
});
