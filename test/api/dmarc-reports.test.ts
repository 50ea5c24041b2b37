import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { FlatConsoleClient, newOperator } from '../support/console';
import { waitFor } from '../support/wait';
import { deliverRaw } from '../support/returns';
import { gz, reportMessage, reportXml, zip, type SyntheticRecord } from '../support/dmarc-reports';
import { dmarcStats } from '../../db/sql/dmarc-reports';
import { MAX_XML_BYTES } from '../../core/dmarc/report';
import { MAX_REPORTS_PER_REPORTER_DAY } from '../../core/dmarc/ingest';
import { uuidv7 } from '../../db/ids';

/**
 * Issue 41: DMARC aggregate reports mailed over real SMTP to `dmarc-reports@<return-path host>` of
 * the shared service's inbound listener, stored once per (reporter, report id), refused without
 * harm when malformed, oversize or a bomb, and shown per day and source on the domain page.
 */
describe('DMARC aggregate reports through the inbound listener', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let t: Tenant;
  let domain: { id: string; name: string; return_path: string; dkim_selector: string };
  let rua: string;
  let c: FlatConsoleClient;
  const day = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate()));
  const sql = () => env.service.db.orm.em.fork().getConnection();

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
    const created = await t.call('POST', '/api/v1/domains', { as: 'admin', body: { name: `dmarc-${Date.now()}.example.test` } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    domain = created.body;
    await sql().execute(`update domains set status = 'verified' where id = ?`, [domain.id]);
    // Where the domain's own suggested DMARC record sends reports (issue 51: it once named an address nobody read).
    const record = (created.body.records as { purpose: string; value: string }[]).find((r) => r.purpose === 'dmarc')!;
    rua = /\brua=mailto:([^;\s]+)/.exec(record.value)![1];
    assert.equal(rua, `dmarc-reports@${domain.return_path}`);
    c = new FlatConsoleClient(env.url);
    const admin = await newOperator(env, t.orgId);
    assert.equal((await c.signIn(admin.email, admin.password)).status, 303);
  });

  const ours = (count: number, dkim: 'pass' | 'fail' = 'pass'): SyntheticRecord => ({
    ip: '192.0.2.10',
    count,
    dkim,
    signatures: [{ domain: domain.name, selector: domain.dkim_selector, result: dkim }],
  });
  const xmlOf = (id: string, records: SyntheticRecord[], org = 'google.com') =>
    reportXml({ org, id, domain: domain.name, begin: day, records });

  /** Mails one report message and waits for the processor's verdict on it. */
  async function mail(filename: string, content: Buffer | string, to = rua): Promise<string> {
    const raw = await reportMessage({ to, filename, content });
    const { response } = await deliverRaw(env.service.inbound!.port, [to], raw);
    const id = /stored as (\S+)/.exec(response)![1];
    const row = await waitFor(async () => {
      const [r] = await sql().execute(`select outcome from inbound_messages where id = ? and processed_at is not null`, [id]);
      return r;
    }, 'the report processed');
    return row.outcome as string;
  }
  const reports = async () =>
    (await sql().execute(`select reporter, report_id from dmarc_reports where domain_id = ? order by report_id`, [domain.id])).map(
      (r: any) => `${r.reporter}/${r.report_id}`,
    );

  it('refuses at RCPT other local parts and hosts that are no domain’s return path', async () => {
    const raw = await reportMessage({ to: rua, filename: 'r.xml', content: xmlOf('x', [ours(1)]) });
    await assert.rejects(deliverRaw(env.service.inbound!.port, [`postmaster@${domain.return_path}`], raw), /550/);
    await assert.rejects(deliverRaw(env.service.inbound!.port, ['dmarc-reports@bounces.unknown.example.test'], raw), /550/);
  });

  it('stores plain, gzip and zip reports, with which rows are this service’s', async () => {
    assert.equal(
      await mail('google.com!d!1!2.xml.gz', gz(xmlOf('gz-1', [ours(100), { ip: '198.51.100.7', count: 5, dkim: 'fail' }]))),
      'dmarc_report',
    );
    assert.equal(await mail('r.zip', zip([{ name: 'r.xml', data: xmlOf('zip-1', [ours(50, 'fail')], 'yahoo.com') }])), 'dmarc_report');
    assert.equal(await mail('r.xml', xmlOf('plain-1', [{ ip: '203.0.113.9', count: 20, dkim: 'pass' }], 'outlook.com')), 'dmarc_report');
    assert.deepEqual(await reports(), ['google.com/gz-1', 'outlook.com/plain-1', 'yahoo.com/zip-1']);
    const rows = await sql().execute(
      `select r.source_ip, r.count, r.ours, r.dkim_aligned from dmarc_report_rows r join dmarc_reports p on p.id = r.report_id
        where p.domain_id = ? order by r.source_ip, r.count`,
      [domain.id],
    );
    assert.deepEqual(
      rows.map((r: any) => [r.source_ip, r.count, r.ours]),
      [
        ['192.0.2.10', 50, true],
        ['192.0.2.10', 100, true],
        ['198.51.100.7', 5, false],
        ['203.0.113.9', 20, false],
      ],
    );
    // A report is no returned message: nothing suppressed, no event.
    const [s] = await sql().execute(`select count(*)::int as n from suppressions where organization_id = ?`, [t.orgId]);
    assert.equal(s.n, 0);
  });

  it('stores a report mailed twice once', async () => {
    assert.equal(await mail('again.xml.gz', gz(xmlOf('gz-1', [ours(100)]))), 'dmarc_duplicate');
    assert.equal(await mail('again.xml.gz', gz(xmlOf('gz-1', [ours(100)], 'Google.com'))), 'dmarc_duplicate', 'whatever the case');
    assert.equal((await reports()).length, 3);
  });

  it('refuses malformed, oversize and zip-bomb reports without harm, and takes the next one', async () => {
    const before = await reports();
    const refused: [string, Buffer | string][] = [
      ['bad.xml', '<feedback><report_metadata>'],
      ['dtd.xml', `<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x "x">]><feedback>&x;</feedback>`],
      ['big.xml.gz', gzipSync(Buffer.alloc(MAX_XML_BYTES + 1024 * 1024, 0x20))],
      [
        'two.zip',
        zip([
          { name: 'a.xml', data: xmlOf('two-a', [ours(1)]) },
          { name: 'b.xml', data: xmlOf('two-b', [ours(1)]) },
        ]),
      ],
      ['bomb.zip', zip([{ name: 'a.xml', data: Buffer.alloc(MAX_XML_BYTES - 1, 0x20) }])],
      ['other.xml', reportXml({ id: 'other-1', domain: 'someone-else.example', begin: day, records: [ours(1)] })],
      ['photo.png', Buffer.from('not a report')],
    ];
    for (const [name, content] of refused) assert.equal(await mail(name, content), 'dmarc_refused', name);
    assert.deepEqual(await reports(), before);
    assert.equal(await mail('next.xml', xmlOf('next-1', [ours(10)], 'mail.ru')), 'dmarc_report');
  });

  it(`takes at most ${MAX_REPORTS_PER_REPORTER_DAY} reports a day from one reporter for a domain, refusing the rest without harm`, async () => {
    // The reporter's reports of today, as if mailed already (each would be a message through the listener).
    for (let i = 0; i < MAX_REPORTS_PER_REPORTER_DAY; i++) {
      await sql().execute(
        `insert into dmarc_reports (id, domain_id, reporter, report_id, begin_at, end_at, received_at) values (?, ?, 'flood.example', ?, ?, ?, now())`,
        [uuidv7(), domain.id, `flood-${i}`, day, new Date(day.getTime() + 3_600_000)],
      );
    }
    const count = async () =>
      (await sql().execute(`select count(*)::int as n from dmarc_reports where domain_id = ?`, [domain.id]))[0].n as number;
    const before = await count();
    assert.equal(await mail('flood.xml', xmlOf('flood-new', [ours(1)], 'flood.example')), 'dmarc_capped');
    assert.equal(await mail('flood.xml', xmlOf('flood-new-2', [ours(1)], 'FLOOD.example')), 'dmarc_capped', 'whatever the case');
    assert.equal(await count(), before, 'nothing stored');
    assert.equal(
      await mail('other.xml', xmlOf('other-reporter-1', [ours(1)], 'fastmail.com')),
      'dmarc_report',
      'another reporter is taken',
    );
    await sql().execute(`delete from dmarc_reports where domain_id = ? and reporter in ('flood.example', 'fastmail.com')`, [domain.id]);
  });

  it('sums a period for the ramp’s gate', async () => {
    const s = await dmarcStats(env.service.db.orm, { domainId: domain.id, from: day, to: new Date(day.getTime() + 86_400_000) });
    assert.equal(s.days, 1);
    assert.equal(s.oursTotal, 160);
    assert.equal(s.oursAligned, 110);
    assert.deepEqual(
      s.sources.map((x) => [x.sourceIp, x.count, x.aligned, x.ours, x.unauthorized]),
      [
        ['192.0.2.10', 160, 110, true, false],
        ['203.0.113.9', 20, 20, false, false],
        ['198.51.100.7', 5, 0, false, false],
      ],
    );
    const none = await dmarcStats(env.service.db.orm, { domainId: domain.id, from: new Date(0), to: new Date(1000) });
    assert.deepEqual(none, { days: 0, oursTotal: 0, oursAligned: 0, sources: [] });
  });

  it('shows each day’s sources on the domain page and marks a source unauthorized, audited', async () => {
    const page = `/console/o/${t.orgId}/domains/${domain.id}`;
    const view = await c.get(page);
    assert.equal(view.status, 200);
    const section = /<section id="dmarc-reports">.*?<\/section>/.exec(view.html)![0];
    assert.ok(section.includes(`dmarc-reports@${domain.return_path}`));
    assert.ok(section.includes(`${day.toISOString().slice(0, 10)} (UTC): 4 reports`), section);
    assert.match(section, /192\.0\.2\.10<\/td><td class="num">160<\/td><td class="num"><span class="bad">68\.8%<\/span><\/td><td>ours/);
    assert.match(section, /198\.51\.100\.7<\/td><td class="num">5<\/td><td class="num"><span class="bad">0%<\/span><\/td><td>other/);

    const bad = await c.post(`${page}/dmarc-sources`, { source_ip: 'not an ip', unauthorized: 'true' });
    assert.equal(bad.status, 422);
    const marked = await c.post(`${page}/dmarc-sources`, { source_ip: '198.51.100.7', unauthorized: 'true' });
    assert.equal(marked.status, 303);
    assert.match(marked.location!, /done=dmarc_source_unauthorized/);
    const again = await c.post(`${page}/dmarc-sources`, { source_ip: '198.51.100.7', unauthorized: 'true' });
    assert.match(again.location!, /done=dmarc_source_unchanged/);
    const audit = await sql().execute(
      `select actor, details from audit_log where organization_id = ? and action = 'domain.dmarc_source_marked'`,
      [t.orgId],
    );
    assert.equal(audit.length, 1);
    assert.match(audit[0].actor, /^console:op-/);
    assert.deepEqual(audit[0].details, { source_ip: '198.51.100.7', unauthorized: true });
    assert.match((await c.get(page)).html, /198\.51\.100\.7<\/td>.*?<td>unauthorized<\/td>/);
    const s = await dmarcStats(env.service.db.orm, { domainId: domain.id, from: day, to: new Date(day.getTime() + 86_400_000) });
    assert.equal(s.sources.find((x) => x.sourceIp === '198.51.100.7')!.unauthorized, true);
  });
});
