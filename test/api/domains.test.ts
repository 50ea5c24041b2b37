import assert from 'node:assert/strict';
import { Resolver } from 'node:dns/promises';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { request } from '../support/http';
import { waitFor } from '../support/wait';
import { createKey, createDomain } from '../../core/provisioning';
import { svcJson } from '../support/child';
import { tempDir } from '../support/pg';
import { checkDomain } from '../../core/domains/verification';
import type { DnsResolver } from '../../core/domains/dns';
import { systemClock } from '../../core/clock';
import pino from 'pino';

interface RecordView {
  purpose: string;
  type: string;
  name: string;
  value: string;
  required: boolean;
  status: string;
  observed: string | null;
}

describe('API: domains, DKIM and DNS verification', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  let n = 0;
  const fresh = () => `d${++n}-${Date.now()}.example.test`;

  /** Publishes a domain's records in the test DNS server, all or some of them, optionally altered. */
  function publish(records: RecordView[], opts: { skip?: string[]; alter?: Record<string, string> } = {}) {
    for (const r of records) {
      if (opts.skip?.includes(r.purpose)) continue;
      const value = opts.alter?.[r.purpose] ?? r.value;
      if (r.type === 'CNAME') {
        env.dns.cname.set(r.name, value);
      } else if (r.type === 'MX') {
        const [priority, exchange] = value.split(' ');
        env.dns.mx.set(r.name, [{ priority: Number(priority), exchange }]);
      } else {
        env.dns.txt.set(r.name, [...(env.dns.txt.get(r.name) ?? []).filter((v) => v.split(' ')[0] !== value.split(' ')[0]), value]);
      }
    }
  }

  const create = async (name = fresh(), extra: object = {}) => {
    const res = await t.call('POST', '/api/v1/domains', { as: 'admin', body: { name, ...extra } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body;
  };

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
    other = await newTenant(env);
  });

  it('creates a domain with its DKIM, return-path and DMARC records, pending until DNS matches', async () => {
    const d = await create('Mail.Shop.Example.TEST.');
    assert.equal(d.name, 'mail.shop.example.test');
    assert.equal(d.status, 'pending');
    assert.equal(d.dns_provider, 'manual');
    assert.equal(d.stream, 'transactional');
    const by = Object.fromEntries(d.records.map((r: RecordView) => [r.purpose, r]));
    assert.equal(by.dkim.type, 'TXT');
    assert.equal(by.dkim.name, `${d.dkim_selector}._domainkey.mail.shop.example.test`);
    assert.match(by.dkim.value, /^v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]{300,}$/);
    assert.equal(by.return_path_mx.name, 'bounces.mail.shop.example.test');
    assert.match(by.return_path_mx.value, /^10 feedback-smtp\./);
    assert.match(by.return_path_spf.value, /^v=spf1 include:_spf\.\S+ ~all$/);
    assert.equal(by.dmarc.required, false);
    for (const r of d.records) assert.equal(r.observed, null);
    // The private key never appears in a response.
    assert.equal(JSON.stringify(d).includes('PRIVATE'), false);
    const stored = await env.service.db.orm.em
      .fork()
      .getConnection()
      .execute('select dkim_private_key_enc as k from domains where id = ?', [d.id]);
    assert.match(stored[0].k, /^v1:/);
    assert.equal(stored[0].k.includes('PRIVATE KEY'), false, 'stored encrypted');
  });

  it('verifies a domain that svc domain create made, with no "verify now": the running service starts its loop', async () => {
    const name = fresh();
    const made = await svcJson(['domain', 'create', '--org', t.orgId, '--name', name], {
      DATABASE_URL: env.service.db.url,
      DATA_DIR: tempDir('svc-cli'),
    });
    assert.equal(made.status, 'pending');
    publish(
      made.records.map((r: Omit<RecordView, 'required' | 'status' | 'observed'>) => ({
        ...r,
        required: true,
        status: 'missing',
        observed: null,
      })),
      { skip: ['dmarc'] },
    );
    const done = await waitFor(
      async () => {
        const got = await t.call('GET', `/api/v1/domains/${made.id}`, { as: 'admin' });
        return got.body.status === 'verified' ? got.body : undefined;
      },
      'the sweep to start the loop and the loop to verify',
      30_000,
    );
    assert.ok(done.verified_at);
  });

  it('verifies by itself once every required record is published, recording what it observed', async () => {
    const d = await create();
    // The first check found nothing:
    const first = await waitFor(async () => {
      const got = await t.call('GET', `/api/v1/domains/${d.id}`, { as: 'admin' });
      return got.body.last_checked_at ? got.body : undefined;
    }, 'first check');
    assert.equal(first.status, 'pending');
    assert.ok(first.records.every((r: RecordView) => r.status === 'missing'));
    publish(d.records, { skip: ['dmarc'] });
    const done = await waitFor(
      async () => {
        const got = await t.call('GET', `/api/v1/domains/${d.id}`, { as: 'admin' });
        return got.body.status === 'verified' ? got.body : undefined;
      },
      'the verification loop to verify',
      30_000,
    );
    const by = Object.fromEntries(done.records.map((r: RecordView) => [r.purpose, r]));
    assert.equal(by.dkim.status, 'verified');
    assert.equal(by.dkim.observed, by.dkim.value);
    assert.match(by.return_path_mx.observed, /^10 feedback-smtp\./);
    assert.equal(by.dmarc.status, 'missing', 'DMARC is a suggestion, not required');
    assert.ok(done.verified_at);
  });

  it('stays pending with a wrong or a missing record, showing what DNS holds; verify now re-checks at once', async () => {
    const d = await create();
    publish(d.records, { alter: { dkim: 'v=DKIM1; k=rsa; p=MIIBwrongkey' }, skip: ['return_path_mx'] });
    let res = await t.call('POST', `/api/v1/domains/${d.id}/verify`, { as: 'admin' });
    assert.equal(res.status, 200);
    assert.equal(res.body.status, 'pending');
    let by = Object.fromEntries(res.body.records.map((r: RecordView) => [r.purpose, r]));
    assert.equal(by.dkim.status, 'mismatch');
    assert.equal(by.dkim.observed, 'v=DKIM1; k=rsa; p=MIIBwrongkey');
    assert.equal(by.return_path_mx.status, 'missing');
    assert.equal(by.return_path_mx.observed, null);
    assert.equal(by.return_path_spf.status, 'verified');
    publish(d.records);
    res = await t.call('POST', `/api/v1/domains/${d.id}/verify`, { as: 'admin' });
    assert.equal(res.body.status, 'verified');
    by = Object.fromEntries(res.body.records.map((r: RecordView) => [r.purpose, r]));
    assert.equal(by.dmarc.status, 'verified');
  });

  it('verify now restarts a verification loop that had ended, which then verifies on its own', async () => {
    const d = await create();
    const sql = env.service.db.orm.em.fork().getConnection();
    // The window passed (moved in the database rather than waited for):
    await sql.execute(`update domains set verifying_until = now() - interval '1 second' where id = ?`, [d.id]);
    const res = await t.call('POST', `/api/v1/domains/${d.id}/verify`, { as: 'admin' });
    assert.equal(res.body.status, 'pending');
    const [row] = await sql.execute('select verification_generation as g, verifying_until > now() as open from domains where id = ?', [
      d.id,
    ]);
    assert.deepEqual([row.g, row.open], [2, true], 'a new generation with a new window');
    publish(d.records);
    await waitFor(
      async () => (await t.call('GET', `/api/v1/domains/${d.id}`, { as: 'admin' })).body.status === 'verified',
      'the restarted loop to verify',
      30_000,
    );
  });

  it('DKIM-signs live mail from a verified domain; the signature verifies against DNS with mailauth', async () => {
    const d = await create();
    publish(d.records);
    assert.equal((await t.call('POST', `/api/v1/domains/${d.id}/verify`, { as: 'admin' })).body.status, 'verified');
    const to = `dkim-${Date.now()}@example.com`;
    const sent = await t.call('POST', '/api/v1/emails', {
      body: { from: `Shop <shop@${d.name}>`, to, subject: 'Signed', html: '<p>signed</p>', text: 'signed' },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const msg = await waitFor(async () => env.sink.received.find((m) => m.envelopeTo.includes(to)), 'the signed message');
    // The VERP return path: a signed token per recipient at the domain's return-path host.
    assert.match(msg.envelopeFrom, new RegExp(`^bounces\\+[a-z2-7]{42}@bounces\\.${d.name.replace(/\./g, '\\.')}$`));
    const resolver = new Resolver();
    resolver.setServers([`127.0.0.1:${env.dns.port}`]);
    const result = await dkimVerify(msg.raw, {
      resolver: (name: string, rr: string) => resolver.resolve(name, rr as 'TXT') as Promise<never>,
    });
    const [sig] = result.results;
    assert.equal(sig.signingDomain, d.name);
    assert.equal(sig.selector, d.dkim_selector);
    assert.equal(sig.status.result, 'pass', JSON.stringify(sig.status));
    // Tampering breaks it: the check can fail.
    const tampered = Buffer.from(msg.raw.toString().replace('Subject: Signed', 'Subject: Changed'));
    assert.equal(
      (await dkimVerify(tampered, { resolver: (name: string, rr: string) => resolver.resolve(name, rr as 'TXT') as Promise<never> }))
        .results[0].status.result,
      'fail',
    );
  });

  it('refuses bad input with 422 (409 for a duplicate) and writes nothing', async () => {
    const count = async () =>
      Number(
        (
          await env.service.db.orm.em
            .fork()
            .getConnection()
            .execute('select count(*) as n from domains where organization_id = ?', [t.orgId])
        )[0].n,
      );
    const existing = await create();
    const before = await count();
    for (const body of [
      {},
      { name: '' },
      { name: 'localhost' },
      { name: '192.168.1.1' },
      { name: 'bad_domain.com' },
      { name: `${'a'.repeat(64)}.com` },
      { name: 'x.com', stream: 'marketing' },
      { name: 'x.com', dns_provider: 'route53' },
      { name: 'x.com', dns_provider: 'cloudflare' },
      { name: 'x.com', verified: true },
      { name: 42 },
      ['x.com'],
    ]) {
      const res = await t.call('POST', '/api/v1/domains', { as: 'admin', body });
      assert.equal(res.status, 422, `${JSON.stringify(body)} → ${res.status}`);
      assert.equal(res.body.error.code, 'validation_error');
    }
    const dup = await t.call('POST', '/api/v1/domains', { as: 'admin', body: { name: existing.name.toUpperCase() } });
    assert.equal(dup.status, 409);
    assert.equal(dup.body.error.code, 'domain_exists');
    assert.equal(await count(), before);
  });

  it('deletes a domain: it can no longer send, and its name is free again', async () => {
    const d = await create();
    publish(d.records);
    await t.call('POST', `/api/v1/domains/${d.id}/verify`, { as: 'admin' });
    const del = await t.call('DELETE', `/api/v1/domains/${d.id}`, { as: 'admin' });
    assert.deepEqual(del.body, { object: 'domain', id: d.id, name: d.name, deleted: true });
    assert.equal((await t.call('GET', `/api/v1/domains/${d.id}`, { as: 'admin' })).status, 404);
    const send = await t.call('POST', '/api/v1/emails', { body: { from: `a@${d.name}`, to: 'x@example.com', subject: 's', text: 't' } });
    assert.equal(send.status, 422);
    assert.equal(send.body.error.code, 'domain_not_verified');
    await create(d.name);
    const log = (await t.call('GET', '/api/v1/audit-log?limit=5', { as: 'admin' })).body.data.map((e: { action: string }) => e.action);
    assert.ok(log.includes('domain.deleted') && log.includes('domain.created'));
  });

  it("keeps organizations and restricted keys apart: others' domains are 404, restricted keys add none", async () => {
    const theirs = (await other.call('POST', '/api/v1/domains', { as: 'admin', body: { name: fresh() } })).body;
    for (const [method, path] of [
      ['GET', `/api/v1/domains/${theirs.id}`],
      ['POST', `/api/v1/domains/${theirs.id}/verify`],
      ['DELETE', `/api/v1/domains/${theirs.id}`],
      ['PATCH', `/api/v1/domains/${theirs.id}`],
      ['GET', '/api/v1/domains/nope'],
      ['PATCH', '/api/v1/domains/nope'],
    ]) {
      const res = await t.call(method, path, { as: 'admin' });
      assert.equal(res.status, 404, `${method} ${path}`);
    }
    assert.ok(!(await t.call('GET', '/api/v1/domains', { as: 'admin' })).body.data.some((x: { id: string }) => x.id === theirs.id));
    const mine = await createDomain(env.service.db.orm, t.orgId, fresh(), { verified: true });
    const { token } = await createKey(env.service.db.orm, t.orgId, {
      name: 'ra',
      permission: 'admin',
      mode: 'live',
      domainIds: [mine.id],
      rateLimit: 1000,
    });
    const add = await request(env.url, 'POST', '/api/v1/domains', { token, body: { name: fresh() } });
    assert.equal(add.status, 403);
    assert.equal(add.body.error.code, 'forbidden_domain');
    const listed = (await request(env.url, 'GET', '/api/v1/domains', { token })).body.data.map((x: { id: string }) => x.id);
    assert.deepEqual(listed, [mine.id]);
    assert.equal(
      (await t.call('POST', '/api/v1/domains', { as: 'test', body: { name: fresh() } })).body.error.code,
      'test_key_not_allowed',
    );
  });

  describe('tracking host (PATCH /domains/:id)', () => {
    const sql = () => env.service.db.orm.em.fork().getConnection();
    const patch = (id: string, body: unknown, as: 'admin' | 'send' | 'test' = 'admin') =>
      t.call('PATCH', `/api/v1/domains/${id}`, { as, body });
    const tracking = (d: { records: RecordView[] }) => d.records.filter((r) => r.purpose === 'tracking');
    /** The records besides MTA-STS hosting's, which a verified domain gains. */
    const ownRecords = (d: { records: RecordView[] }) =>
      d.records.filter((r) => !['mta_sts_host', 'mta_sts', 'tls_rpt'].includes(r.purpose));
    /** The platform's mail domain, read from the return-path MX every domain points at. */
    const platformOf = (d: { records: RecordView[] }) =>
      d.records.find((r) => r.purpose === 'return_path_mx')!.value.split(' feedback-smtp.')[1];
    /** What the send path reads: the domain's tracking host with a verified tracking record of that name. */
    const trackingOk = async (id: string) =>
      (
        await sql().execute(
          `select d.tracking_host is not null and exists (
             select 1 from jsonb_array_elements(d.records) rec
              where rec->>'purpose' = 'tracking' and rec->>'status' = 'verified' and rec->>'name' = d.tracking_host) as ok
             from domains d where d.id = ?`,
          [id],
        )
      )[0].ok as boolean;

    it('sets the host: its CNAME record joins the records, is checked at once and by verify now, and never decides the domain status', async () => {
      const made = await create();
      publish(made.records);
      assert.equal((await t.call('POST', `/api/v1/domains/${made.id}/verify`, { as: 'admin' })).body.status, 'verified');
      const host = `links.${made.name}`;
      let res = await patch(made.id, { tracking_host: ` Links.${made.name.toUpperCase()}. ` });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.object, 'domain');
      assert.equal(res.body.tracking_host, host);
      assert.equal(res.body.status, 'verified');
      const target = `track.${platformOf(made)}`;
      // Checked at once: nothing published yet.
      assert.deepEqual(tracking(res.body), [
        { purpose: 'tracking', type: 'CNAME', name: host, value: target, required: false, status: 'missing', observed: null },
      ]);
      // Verified, the domain's MTA-STS hosting added its three records too (docs/domains.md).
      assert.equal(ownRecords(res.body).length, made.records.length + 1);
      assert.equal(await trackingOk(made.id), false);
      const log = (await t.call('GET', '/api/v1/audit-log?limit=1', { as: 'admin' })).body.data[0];
      assert.equal(log.action, 'domain.updated');
      assert.deepEqual(log.target, { type: 'domain', id: made.id });
      assert.deepEqual(log.details.changes, { tracking_host: host });
      assert.equal((await t.call('GET', `/api/v1/domains/${made.id}`, { as: 'admin' })).body.tracking_host, host);

      // Published (resolvers differ in case and the trailing dot): verify now finds it.
      env.dns.cname.set(host, `${target.toUpperCase()}.`);
      res = await t.call('POST', `/api/v1/domains/${made.id}/verify`, { as: 'admin' });
      assert.equal(res.body.status, 'verified');
      assert.deepEqual(
        tracking(res.body).map((r) => [r.status, r.observed]),
        [['verified', target]],
      );
      assert.equal(await trackingOk(made.id), true);

      // Pointed elsewhere: a mismatch showing what DNS holds; the domain stays verified.
      env.dns.cname.set(host, 'elsewhere.example.net.');
      res = await t.call('POST', `/api/v1/domains/${made.id}/verify`, { as: 'admin' });
      assert.equal(res.body.status, 'verified');
      assert.deepEqual(
        tracking(res.body).map((r) => [r.status, r.observed]),
        [['mismatch', 'elsewhere.example.net']],
      );
      assert.equal(await trackingOk(made.id), false);

      // The same host again with the record in place changes nothing (no audit entry).
      const audits = async () =>
        Number((await sql().execute('select count(*) as n from audit_log where organization_id = ?', [t.orgId]))[0].n);
      const before = await audits();
      res = await patch(made.id, { tracking_host: host });
      assert.equal(res.status, 200);
      assert.equal(tracking(res.body)[0].status, 'mismatch');
      assert.equal(await audits(), before);
      // An empty body changes nothing either.
      res = await patch(made.id, {});
      assert.equal(res.status, 200);
      assert.equal(res.body.tracking_host, host);
      assert.equal(await audits(), before);

      // Another host replaces the record (one tracking record, of the new name), checked at once.
      const other = `t.${made.name}`;
      env.dns.cname.set(other, target);
      res = await patch(made.id, { tracking_host: other });
      assert.equal(res.status, 200);
      assert.equal(res.body.tracking_host, other);
      assert.deepEqual(
        tracking(res.body).map((r) => [r.name, r.status, r.observed]),
        [[other, 'verified', target]],
      );
      assert.equal(await trackingOk(made.id), true);

      // null removes the host and its record.
      res = await patch(made.id, { tracking_host: null });
      assert.equal(res.status, 200);
      assert.equal(res.body.tracking_host, null);
      assert.deepEqual(tracking(res.body), []);
      assert.equal(ownRecords(res.body).length, made.records.length);
      assert.equal(res.body.status, 'verified');
      const [row] = await sql().execute('select tracking_host, records from domains where id = ?', [made.id]);
      assert.equal(row.tracking_host, null);
      assert.ok(!row.records.some((r: RecordView) => r.purpose === 'tracking'));
      assert.equal(await trackingOk(made.id), false);
      assert.equal((await t.call('GET', '/api/v1/audit-log?limit=1', { as: 'admin' })).body.data[0].details.changes.tracking_host, null);
    });

    it('a pending domain verifies on its required records alone, whatever its tracking record shows', async () => {
      const made = await create();
      const res = await patch(made.id, { tracking_host: `links.${made.name}` });
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'pending');
      publish(res.body.records, { skip: ['tracking'] });
      const done = await t.call('POST', `/api/v1/domains/${made.id}/verify`, { as: 'admin' });
      assert.equal(done.body.status, 'verified');
      assert.equal(tracking(done.body)[0].status, 'missing');
    });

    it('refuses bad hosts and unknown fields with 422 and writes nothing', async () => {
      const made = await create();
      const host = `links.${made.name}`;
      assert.equal((await patch(made.id, { tracking_host: host })).status, 200);
      const state = async () =>
        JSON.stringify([
          await sql().execute('select tracking_host, records from domains where id = ?', [made.id]),
          await sql().execute('select count(*) as n from audit_log where organization_id = ?', [t.orgId]),
        ]);
      const before = await state();
      const hostRule: unknown[] = [
        { tracking_host: '' },
        { tracking_host: 'localhost' },
        { tracking_host: '192.168.1.1' },
        { tracking_host: 'bad_host.example.com' },
        { tracking_host: `${'a'.repeat(64)}.com` },
        { tracking_host: `${'a.'.repeat(130)}com` },
        { tracking_host: 'links example.com' },
        { tracking_host: 'https://links.example.com' },
        { tracking_host: 'links.example.com/x' },
        { tracking_host: '*.example.com' },
        { tracking_host: 'links.\u0000example.com' },
        { tracking_host: made.name },
        { tracking_host: `${made.name.toUpperCase()}.` },
        { tracking_host: `bounces.${made.name}` },
        { tracking_host: 'links.example.com' },
        { tracking_host: `links.x${made.name}` },
        { tracking_host: 42 },
        { tracking_host: true },
        { tracking_host: ['links.example.com'] },
        { tracking_host: { host: 'links.example.com' } },
      ];
      for (const body of [
        ...hostRule,
        { tracking_host: 'links.example.com', name: 'x.com' },
        { trackingHost: 'links.example.com' },
        ['x'],
      ]) {
        const res = await patch(made.id, body);
        assert.equal(res.status, 422, `${JSON.stringify(body)} → ${res.status} ${JSON.stringify(res.body)}`);
        assert.equal(res.body.error.code, 'validation_error');
        if (hostRule.includes(body))
          assert.ok(
            res.body.error.details.some((x: { field: string }) => x.field === 'tracking_host'),
            `${JSON.stringify(body)}: ${JSON.stringify(res.body.error)}`,
          );
      }
      const raw = await t.call('PATCH', `/api/v1/domains/${made.id}`, { as: 'admin', raw: '{"tracking_host":"links.example.com"' });
      assert.equal(raw.status, 400);
      assert.equal(await state(), before);
    });

    it("keeps others' domains out of reach and needs a live ADMIN key", async () => {
      const theirs = (await other.call('POST', '/api/v1/domains', { as: 'admin', body: { name: fresh() } })).body;
      const res = await patch(theirs.id, { tracking_host: `links.${theirs.name}` });
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'not_found');
      assert.equal((await other.call('GET', `/api/v1/domains/${theirs.id}`, { as: 'admin' })).body.tracking_host, null);
      const mine = await create();
      const send = await patch(mine.id, { tracking_host: `links.${mine.name}` }, 'send');
      assert.deepEqual([send.status, send.body.error.code], [403, 'forbidden']);
      const test = await patch(mine.id, { tracking_host: `links.${mine.name}` }, 'test');
      assert.deepEqual([test.status, test.body.error.code], [403, 'test_key_not_allowed']);
      // A domain-restricted ADMIN key manages its own domains' tracking hosts, and no other's.
      const { token } = await createKey(env.service.db.orm, t.orgId, {
        name: 'ra-tracking',
        permission: 'admin',
        mode: 'live',
        domainIds: [mine.id],
        rateLimit: 1000,
      });
      const own = await request(env.url, 'PATCH', `/api/v1/domains/${mine.id}`, { token, body: { tracking_host: `links.${mine.name}` } });
      assert.equal(own.status, 200);
      assert.equal(own.body.tracking_host, `links.${mine.name}`);
      const sibling = await request(env.url, 'PATCH', `/api/v1/domains/${t.domainId}`, {
        token,
        body: { tracking_host: `links.${t.domain}` },
      });
      assert.equal(sibling.status, 404);
      assert.equal((await t.call('GET', `/api/v1/domains/${mine.id}`, { as: 'admin' })).body.tracking_host, `links.${mine.name}`);
    });

    it('a check that raced a change of the tracking host does not put the old records back', async () => {
      const made = await create();
      const host = `links.${made.name}`;
      let patched: Promise<unknown> | undefined;
      // The check reads the records, then (while it resolves) the host is set through the API.
      const dns: DnsResolver = {
        resolveTxt: async () => {
          patched ??= patch(made.id, { tracking_host: host }).then((r) => assert.equal(r.status, 200));
          await patched;
          return [];
        },
        resolveMx: async () => [],
        resolveCname: async () => [],
      };
      await checkDomain({ orm: env.service.db.orm, dns, clock: systemClock, log: pino({ level: 'silent' }) }, made.id);
      assert.ok(patched, 'the race happened');
      const got = (await t.call('GET', `/api/v1/domains/${made.id}`, { as: 'admin' })).body;
      assert.equal(got.tracking_host, host);
      assert.deepEqual(
        tracking(got).map((r) => r.name),
        [host],
      );
    });
  });
});
