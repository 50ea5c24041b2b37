import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import { MAX_XML_BYTES, ReportRefused, gunzipCapped, parseAggregateReport, reportXmlOf, unzipOne } from '../../core/dmarc/report';
import { dmarcReportHost } from '../../core/bounces/apply';
import { gz, reportMessage, reportXml, zip } from '../support/dmarc-reports';

const begin = new Date('2026-12-01T00:00:00Z');
const xml = reportXml({
  org: 'AT&amp;T',
  id: 'r-1',
  domain: 'shop.example',
  begin,
  records: [
    { ip: '192.0.2.10', count: 40, dkim: 'pass', signatures: [{ domain: 'shop.example', selector: 's1' }] },
    { ip: '2001:db8::1', count: 3, dkim: 'fail', spf: 'fail', disposition: 'quarantine' },
  ],
});

const refused = (fn: () => unknown, re: RegExp) =>
  assert.throws(fn, (err: unknown) => err instanceof ReportRefused && re.test(err.message));
const refusedAsync = (p: Promise<unknown>, re: RegExp) =>
  assert.rejects(p, (err: unknown) => err instanceof ReportRefused && re.test(err.message));

describe('DMARC aggregate reports: parsing', () => {
  it('reads the metadata, the range and each record (RFC 7489 Appendix C)', () => {
    const r = parseAggregateReport(xml);
    assert.equal(r.reporter, 'AT&T');
    assert.equal(r.reportId, 'r-1');
    assert.equal(r.policyDomain, 'shop.example');
    assert.equal(r.begin.toISOString(), begin.toISOString());
    assert.equal(r.end.getTime(), begin.getTime() + 86_399_000);
    assert.deepEqual(r.records[0], {
      sourceIp: '192.0.2.10',
      count: 40,
      disposition: 'none',
      dkimAligned: true,
      spfAligned: false,
      headerFrom: 'shop.example',
      dkimAuth: [{ domain: 'shop.example', selector: 's1', result: 'pass' }],
    });
    assert.equal(r.records[1].sourceIp, '2001:db8::1');
    assert.equal(r.records[1].dkimAligned, false);
    assert.deepEqual(r.records[1].dkimAuth, []);
  });

  it('reads a DMARCbis report with a namespace', () => {
    const r = parseAggregateReport(xml.replace('<feedback>', '<feedback xmlns="urn:ietf:params:xml:ns:dmarc-2.0">'));
    assert.equal(r.records.length, 2);
  });

  it('refuses a DTD and entities, never expanding them', () => {
    const bomb = `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>${xml.replace(/^<\?xml[^>]*>/, '')}`;
    refused(() => parseAggregateReport(bomb), /DTD/);
  });

  it('refuses what a report must have: records, a source IP, a count, pass or fail', () => {
    refused(() => parseAggregateReport('<feedback></feedback>'), /missing/);
    refused(() => parseAggregateReport('not xml at all <<<'), /missing|well formed/);
    refused(() => parseAggregateReport(xml.replace(/<record>[\s\S]*<\/record>/, '')), /without records/);
    refused(() => parseAggregateReport(xml.replace('192.0.2.10', 'not-an-ip')), /source_ip/);
    refused(() => parseAggregateReport(xml.replace('<count>40</count>', '<count>-4</count>')), /count/);
    refused(() => parseAggregateReport(xml.replace('<dkim>pass</dkim>', '<dkim>maybe</dkim>')), /pass or fail/);
    refused(() => parseAggregateReport(xml.replace('<disposition>none', '<disposition>drop')), /disposition/);
  });
});

describe('DMARC aggregate reports: attachments and limits', () => {
  it('takes the XML plain, gzip or zip from the message', async () => {
    for (const [filename, content] of [
      ['report.xml', xml],
      ['google.com!shop.example!1!2.xml.gz', gz(xml)],
      ['google.com!shop.example!1!2.zip', zip([{ name: 'google.com!shop.example!1!2.xml', data: xml }])],
    ] as const) {
      const raw = await reportMessage({ to: 'dmarc-reports@bounces.shop.example', filename, content });
      assert.equal(parseAggregateReport(await reportXmlOf(raw)).reportId, 'r-1', filename);
    }
  });

  it('refuses a message without a report attachment', async () => {
    const raw = await reportMessage({ to: 'dmarc-reports@bounces.shop.example', filename: 'photo.png', content: Buffer.from('x') });
    await refusedAsync(reportXmlOf(raw), /no report attachment/);
  });

  it('stops inflating a gzip bomb at the cap', () => {
    const bomb = gzipSync(Buffer.alloc(MAX_XML_BYTES + 1024 * 1024, 0x20));
    refused(() => gunzipCapped(bomb), /inflates past/);
    refused(() => gunzipCapped(Buffer.from('not gzip')), /corrupt/);
  });

  it('refuses a zip with more than one entry, a non-XML entry, a bomb, or a lying size', () => {
    refused(
      () =>
        unzipOne(
          zip([
            { name: 'a.xml', data: xml },
            { name: 'b.xml', data: xml },
          ]),
        ),
      /one entry, not 2/,
    );
    refused(() => unzipOne(zip([{ name: 'a.exe', data: xml }])), /not an .xml/);
    refused(() => unzipOne(zip([{ name: 'a.xml', data: Buffer.alloc(MAX_XML_BYTES + 1, 0x20) }])), /declares/);
    refused(() => unzipOne(zip([{ name: 'a.xml', data: Buffer.alloc(5 * 1024 * 1024, 0x20) }])), /ratio/);
    // The declared size understated: inflating still stops at the cap.
    const liar = zip([{ name: 'a.xml', data: Buffer.alloc(MAX_XML_BYTES + 1024 * 1024, 0x20) }]);
    const cd = liar.lastIndexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
    liar.writeUInt32LE(1000, cd + 24);
    refused(() => unzipOne(liar), /ratio|inflates past/);
    refused(() => unzipOne(Buffer.from('PK not really')), /not a zip/);
  });

  it('routes only dmarc-reports@ as a report', () => {
    assert.equal(dmarcReportHost(['Dmarc-Reports@Bounces.Shop.Example']), 'bounces.shop.example');
    assert.equal(dmarcReportHost(['complaints@bounces.shop.example']), null);
  });
});
