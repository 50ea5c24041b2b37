import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { AuditEntry, Domain } from '../../db/entities';
import { createDomain, createOrganization } from '../../core/provisioning';
import { createSecrets } from '../../core/secrets';
import { platformDns, evaluate } from '../../core/domains/identity';
import { parseStsPolicy, parseStsRecord, mxMatchesPolicy } from '../../core/delivery/mta-sts';
import {
  MAX_AGE,
  domainHosting,
  ensureHosting,
  hostOfPolicyRequest,
  hostingRecords,
  newPolicyId,
  policyText,
  returnPathMx,
  setHostingMode,
  withHostingRecords,
} from '../../core/domains/mta-sts-hosting';
import { countsFor, parseTlsReport } from '../../core/domains/tls-report';
import { insertTlsReport, servedHosting, tlsReportDays } from '../../db/sql/mta-sts-hosting';
import { openTestDb } from '../support/db-fixtures';

const PUBLIC = 'https://svc.example.test';
const identity = { secrets: createSecrets(randomBytes(32)), platform: platformDns('mail.example.test') };

/** A report as RFC 8460 §4.3 writes one (its example, with our host). */
const report = (host: string, over: Record<string, unknown> = {}) => ({
  'organization-name': 'Company-X',
  'date-range': { 'start-datetime': '2031-04-01T00:00:00Z', 'end-datetime': '2031-04-01T23:59:59Z' },
  'contact-info': 'sts-reporting@company-x.example',
  'report-id': '5065427c-23d3-47ca-b6e0-946ea0e8c4be',
  policies: [
    {
      policy: { 'policy-type': 'sts', 'policy-string': ['version: STSv1', 'mode: testing'], 'policy-domain': host },
      summary: { 'total-successful-session-count': 5326, 'total-failure-session-count': 303 },
      'failure-details': [{ 'result-type': 'certificate-expired', 'failed-session-count': 100 }],
    },
  ],
  ...over,
});

describe('core/domains/mta-sts-hosting: the policy served for return-path hosts, its records, its mode', function () {
  describe('pure rules', () => {
    it('writes a policy a sender reads back as written (parseStsPolicy), CRLF line ends, max_age by mode', () => {
      for (const mode of ['testing', 'enforce'] as const) {
        const body = policyText({ mode, mx: 'feedback-smtp.mail.example.test' });
        assert.equal(body, `version: STSv1\r\nmode: ${mode}\r\nmx: feedback-smtp.mail.example.test\r\nmax_age: ${MAX_AGE[mode]}\r\n`);
        const read = parseStsPolicy('x1', body);
        assert.ok(!('error' in read), JSON.stringify(read));
        assert.deepEqual(read, { id: 'x1', mode, mx: ['feedback-smtp.mail.example.test'], maxAgeSeconds: MAX_AGE[mode] });
        assert.ok(mxMatchesPolicy(read, 'feedback-smtp.mail.example.test.'));
      }
    });

    it('issues ids of 1 to 32 letters and digits, different each time, that the record grammar accepts', () => {
      const now = new Date('2031-04-01T10:00:00Z');
      const ids = new Set(Array.from({ length: 50 }, () => newPolicyId(now)));
      assert.equal(ids.size, 50);
      for (const id of ids) {
        assert.match(id, /^[A-Za-z0-9]{1,32}$/);
        assert.deepEqual(parseStsRecord([`v=STSv1; id=${id}`]), { id });
      }
    });

    it('names the host from the Host of a policy request', () => {
      assert.equal(hostOfPolicyRequest('mta-sts.bounces.example.com'), 'bounces.example.com');
      assert.equal(hostOfPolicyRequest('MTA-STS.Bounces.Example.COM.'), 'bounces.example.com');
      for (const h of ['bounces.example.com', 'mta-sts.', 'mta-sts.com_', 'xmta-sts.a.b', '127.0.0.1', ''])
        assert.equal(hostOfPolicyRequest(h), null, h);
    });

    it('makes three optional records (CNAME, _mta-sts, _smtp._tls) that the verification rules accept as published', () => {
      const records = hostingRecords(
        { host: 'bounces.ex.test', policyId: 'abc123', reportToken: 'f'.repeat(32) },
        'http://svc.example.test:8080/',
      );
      assert.deepEqual(
        records.map((r) => [r.purpose, r.type, r.name, r.value, r.required]),
        [
          ['mta_sts_host', 'CNAME', 'mta-sts.bounces.ex.test', 'svc.example.test', false],
          ['mta_sts', 'TXT', '_mta-sts.bounces.ex.test', 'v=STSv1; id=abc123', false],
          ['tls_rpt', 'TXT', '_smtp._tls.bounces.ex.test', `v=TLSRPTv1; rua=https://svc.example.test:8080/tlsrpt/${'f'.repeat(32)}`, false],
        ],
      );
      assert.equal(evaluate(records[0], { cname: ['svc.example.test.'] }).status, 'verified');
      assert.equal(evaluate(records[1], { txt: ['v=STSv1;  id=abc123'] }).status, 'verified');
      assert.equal(evaluate(records[1], { txt: ['v=STSv1; id=older'] }).status, 'mismatch');
      assert.equal(evaluate(records[2], { txt: [records[2].value] }).status, 'verified');
    });

    it('merges the records into a domain’s, keeping what was observed of an unchanged one', () => {
      const base = [
        { purpose: 'dkim', type: 'TXT' as const, name: 'a', value: 'b', required: true, observed: null, status: 'pending' as const },
      ];
      const mine = hostingRecords({ host: 'h.test', policyId: 'one', reportToken: 't' }, PUBLIC);
      const first = withHostingRecords(base, mine)!;
      assert.equal(first.length, 4);
      assert.equal(withHostingRecords(first, mine), null, 'unchanged: nothing to write');
      const observed = first.map((r) => ({ ...r, status: 'verified' as const, observed: r.value }));
      const next = withHostingRecords(observed, hostingRecords({ host: 'h.test', policyId: 'two', reportToken: 't' }, PUBLIC))!;
      assert.deepEqual(
        next.map((r) => [r.purpose, r.status]),
        [
          ['dkim', 'verified'],
          ['mta_sts_host', 'verified'],
          ['mta_sts', 'pending'],
          ['tls_rpt', 'verified'],
        ],
      );
    });

    it('reads TLS-RPT reports: the RFC 8460 example, and refuses what is not one', () => {
      const r = parseTlsReport(report('Bounces.Ex.Test.'));
      assert.ok(!('error' in r));
      assert.deepEqual(r, {
        reporter: 'Company-X',
        reportId: '5065427c-23d3-47ca-b6e0-946ea0e8c4be',
        day: '2031-04-01',
        policies: [{ domain: 'bounces.ex.test', successes: 5326, failures: 303 }],
      });
      assert.deepEqual(countsFor(r, 'bounces.ex.test'), { successes: 5326, failures: 303 });
      assert.equal(countsFor(r, 'other.test'), null);
      const bad = [
        null,
        [],
        'x',
        report('h', { 'organization-name': '' }),
        report('h', { 'report-id': 'x'.repeat(300) }),
        report('h', { 'date-range': { 'start-datetime': '+275760-09-13T00:00:00.000Z' } }),
        report('h', { 'date-range': { 'start-datetime': '1999-12-31T00:00:00Z' } }),
        report('h', { 'date-range': 'today' }),
        report('h', { policies: [] }),
        report('h', { policies: [{ policy: {}, summary: {} }] }),
        report('h', {
          policies: [
            { policy: { 'policy-domain': 'h' }, summary: { 'total-successful-session-count': -1, 'total-failure-session-count': 0 } },
          ],
        }),
        report('h', {
          policies: [
            { policy: { 'policy-domain': 'h' }, summary: { 'total-successful-session-count': 1e400, 'total-failure-session-count': 0 } },
          ],
        }),
        report('h', { policies: Array.from({ length: 1001 }, () => report('h').policies[0]) }),
      ];
      for (const b of bad) assert.ok('error' in parseTlsReport(b), JSON.stringify(b).slice(0, 100));
    });
  });

  describe('against PostgreSQL', () => {
    let orm: Orm;
    let orgId: string;

    before(async () => {
      orm = await openTestDb('mta_sts_hosting');
      orgId = (await createOrganization(orm, 'Hosting', 'standard')).id;
    });
    after(() => orm.close());

    const newDomain = async (name = `h${randomBytes(4).toString('hex')}.example.test`) =>
      createDomain(orm, orgId, name, { verified: true, identity });
    const audits = async (domainId: string) =>
      (await orm.em.fork().find(AuditEntry, { targetId: domainId }, { orderBy: { createdAt: 'asc' } })).map((a) => [
        a.action,
        a.actor,
        a.details,
      ]);
    const recordsOf = async (domainId: string) => (await orm.em.fork().findOneOrFail(Domain, { id: domainId })).records;

    it('hosts a domain’s return-path host in testing, with its records added (optional) and the first policy audited', async () => {
      const d = await newDomain();
      assert.equal(await servedHosting(orm, d.returnPathHost!), null, 'no policy before the first look');
      const h = (await ensureHosting(orm, d.id, PUBLIC))!;
      assert.equal(h.host, d.returnPathHost);
      assert.equal(h.mode, 'testing');
      assert.equal(h.mx, returnPathMx(d.records));
      assert.equal(h.mx, 'feedback-smtp.mail.example.test');
      const records = await recordsOf(d.id);
      assert.deepEqual(records.slice(0, d.records.length), d.records, 'the identity records stay as they were');
      assert.deepEqual(records.slice(d.records.length), hostingRecords(h, PUBLIC));
      assert.ok(records.slice(d.records.length).every((r) => !r.required));
      const again = (await ensureHosting(orm, d.id, PUBLIC))!;
      assert.equal(again.policyId, h.policyId, 'looking again changes nothing');
      assert.deepEqual(await audits(d.id), [['domain.mta_sts_hosted', null, { host: h.host, mode: 'testing', policy_id: h.policyId }]]);
      assert.deepEqual(await servedHosting(orm, h.host), again);
    });

    it('hosts only a verified domain, and reading what the page shows writes nothing', async () => {
      const pending = await createDomain(orm, orgId, `p${randomBytes(4).toString('hex')}.example.test`, { identity });
      assert.equal(await ensureHosting(orm, pending.id, PUBLIC), null);
      assert.deepEqual(await domainHosting(orm, pending.id), {
        verified: false,
        verifiedAt: null,
        host: pending.returnPathHost,
        hosting: null,
        mxChanged: false,
      });
      const d = await newDomain();
      assert.equal((await domainHosting(orm, d.id))!.hosting, null);
      assert.equal(await servedHosting(orm, d.returnPathHost!), null, 'a read made nothing');
      assert.deepEqual(await audits(pending.id), []);
      const h = (await ensureHosting(orm, d.id, PUBLIC, new Date(), 'console:ops@example.com'))!;
      assert.deepEqual((await domainHosting(orm, d.id))!.hosting, h);
      assert.equal((await audits(d.id))[0]![1], 'console:ops@example.com');
    });

    it('moves the mode to enforce and back, a new id and record each time, audited; the same mode again writes nothing', async () => {
      const d = await newDomain();
      const first = (await ensureHosting(orm, d.id, PUBLIC))!;
      const up = await setHostingMode(orm, { domainId: d.id, mode: 'enforce', publicBase: PUBLIC }, 'console:ops@example.com');
      assert.ok(up.changed);
      assert.equal(up.hosting.mode, 'enforce');
      assert.notEqual(up.hosting.policyId, first.policyId);
      const txt = (await recordsOf(d.id)).find((r) => r.purpose === 'mta_sts')!;
      assert.equal(txt.value, `v=STSv1; id=${up.hosting.policyId}`);
      assert.equal(txt.status, 'pending');
      const same = await setHostingMode(orm, { domainId: d.id, mode: 'enforce', publicBase: PUBLIC }, 'console:ops@example.com');
      assert.equal(same.changed, false);
      const down = await setHostingMode(orm, { domainId: d.id, mode: 'testing', publicBase: PUBLIC }, 'console:ops@example.com');
      assert.ok(down.changed);
      assert.notEqual(down.hosting.policyId, up.hosting.policyId);
      assert.equal((await servedHosting(orm, d.returnPathHost!))!.policyId, down.hosting.policyId);
      assert.deepEqual((await audits(d.id)).slice(1), [
        [
          'domain.mta_sts_mode_set',
          'console:ops@example.com',
          { host: first.host, from: 'testing', to: 'enforce', policy_id: up.hosting.policyId },
        ],
        [
          'domain.mta_sts_mode_set',
          'console:ops@example.com',
          { host: first.host, from: 'enforce', to: 'testing', policy_id: down.hosting.policyId },
        ],
      ]);
    });

    it('issues a new id when the return path’s MX changes, and serves nothing once the domain is deleted', async () => {
      const d = await newDomain();
      const first = (await ensureHosting(orm, d.id, PUBLIC))!;
      const em = orm.em.fork();
      const row = await em.findOneOrFail(Domain, { id: d.id });
      row.records = row.records.map((r) => (r.purpose === 'return_path_mx' ? { ...r, value: '10 feedback-smtp.new.example.test' } : r));
      await em.flush();
      const next = (await ensureHosting(orm, d.id, PUBLIC))!;
      assert.equal(next.mx, 'feedback-smtp.new.example.test');
      assert.notEqual(next.policyId, first.policyId);
      assert.equal((await audits(d.id)).at(-1)![0], 'domain.mta_sts_policy_changed');
      row.deletedAt = new Date();
      await em.flush();
      assert.equal(await servedHosting(orm, d.returnPathHost!), null);
    });

    it('keeps each report once and sums a host’s reports per day', async () => {
      const d = await newDomain();
      const h = (await ensureHosting(orm, d.id, PUBLIC))!;
      const at = new Date();
      const one = { host: h.host, reporter: 'A', reportId: 'r1', day: '2031-04-01', successes: 10, failures: 1, at };
      assert.equal(await insertTlsReport(orm, one), true);
      assert.equal(await insertTlsReport(orm, one), false, 'the same report again');
      await insertTlsReport(orm, { ...one, reporter: 'B', successes: 5, failures: 0 });
      await insertTlsReport(orm, { ...one, reportId: 'r2', day: '2031-04-02', successes: 7, failures: 2 });
      assert.deepEqual(await tlsReportDays(orm, { host: h.host, from: '2031-03-01', to: '2031-04-30' }), [
        { day: '2031-04-02', reports: 1, successes: 7, failures: 2 },
        { day: '2031-04-01', reports: 2, successes: 15, failures: 1 },
      ]);
    });
  });
});
