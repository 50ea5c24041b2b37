import { crc32, deflateRawSync, gzipSync } from 'node:zlib';
import MailComposer from 'nodemailer/lib/mail-composer';

/**
 * Synthetic DMARC aggregate reports (RFC 7489 Appendix C) as receivers send them: the XML, gzip or
 * zip, attached to a message from the reporter to the domain's `rua=`.
 */

export interface SyntheticRecord {
  ip: string;
  count: number;
  dkim?: 'pass' | 'fail';
  spf?: 'pass' | 'fail';
  disposition?: string;
  headerFrom?: string;
  /** auth_results dkim entries: d= and selector. */
  signatures?: { domain: string; selector: string; result?: string }[];
}

export function reportXml(o: { org?: string; id: string; domain: string; begin: Date; days?: number; records: SyntheticRecord[] }): string {
  const begin = Math.floor(o.begin.getTime() / 1000);
  const end = begin + (o.days ?? 1) * 86_400 - 1;
  const records = o.records
    .map(
      (r) => `  <record>
    <row>
      <source_ip>${r.ip}</source_ip>
      <count>${r.count}</count>
      <policy_evaluated><disposition>${r.disposition ?? 'none'}</disposition><dkim>${r.dkim ?? 'pass'}</dkim><spf>${r.spf ?? 'fail'}</spf></policy_evaluated>
    </row>
    <identifiers><header_from>${r.headerFrom ?? o.domain}</header_from></identifiers>
    <auth_results>
${(r.signatures ?? []).map((s) => `      <dkim><domain>${s.domain}</domain><selector>${s.selector}</selector><result>${s.result ?? 'pass'}</result></dkim>`).join('\n')}
      <spf><domain>${o.domain}</domain><result>pass</result></spf>
    </auth_results>
  </record>`,
    )
    .join('\n');
  return `<?xml version="1.0" encoding="UTF-8" ?>
<feedback>
  <report_metadata>
    <org_name>${o.org ?? 'google.com'}</org_name>
    <email>noreply-dmarc-support@google.com</email>
    <report_id>${o.id}</report_id>
    <date_range><begin>${begin}</begin><end>${end}</end></date_range>
  </report_metadata>
  <policy_published><domain>${o.domain}</domain><adkim>r</adkim><aspf>r</aspf><p>none</p><sp>none</sp></policy_published>
${records}
</feedback>
`;
}

export const gz = (xml: string | Buffer) => gzipSync(xml);

/** A zip archive of the given entries (deflated), enough of the format for a report. */
export function zip(entries: { name: string; data: string | Buffer }[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const raw = Buffer.from(e.data);
    const packed = deflateRawSync(raw);
    const name = Buffer.from(e.name);
    const crc = crc32(raw);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(8, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(packed.length, 18);
    local.writeUInt32LE(raw.length, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(8, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(packed.length, 20);
    central.writeUInt32LE(raw.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, packed);
    centrals.push(central, name);
    offset += local.length + name.length + packed.length;
  }
  const cd = Buffer.concat(centrals);
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  eocd.writeUInt16LE(entries.length, 8);
  eocd.writeUInt16LE(entries.length, 10);
  eocd.writeUInt32LE(cd.length, 12);
  eocd.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, eocd]);
}

/** The message a reporter mails: a short text and the report attached. */
export function reportMessage(o: { to: string; filename: string; content: Buffer | string; contentType?: string }): Promise<Buffer> {
  return new MailComposer({
    from: 'noreply-dmarc-support@google.com',
    to: o.to,
    subject: `Report domain: ${o.to.split('@')[1]}`,
    text: 'This is an aggregate report from google.com.',
    attachments: [{ filename: o.filename, content: o.content, contentType: o.contentType }],
  })
    .compile()
    .build();
}
