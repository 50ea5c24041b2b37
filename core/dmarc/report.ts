import { isIP } from 'node:net';
import type { NewReportRow } from '../../db/sql/dmarc-reports';
import { gunzipSync, inflateRawSync } from 'node:zlib';
import { simpleParser } from 'mailparser';
import { XMLParser } from 'fast-xml-parser';

/**
 * DMARC aggregate reports (RFC 7489 §7.2 and Appendix C): the XML, alone or gzip- or zip-compressed,
 * attached to a message mailed to the domain's `rua=`. Everything here treats the report as hostile:
 * decompression stops at MAX_XML_BYTES (a bomb never inflates past it), a zip holds exactly one
 * entry, and the XML is read without DTDs or entity expansion.
 */

/** The largest report taken, decompressed. */
export const MAX_XML_BYTES = 10 * 1024 * 1024;
/** Past this compression ratio a zip entry is a bomb, not a report (XML reports compress well under it). */
export const MAX_RATIO = 250;
/** Records one report may hold (a report is per reporter and day; big receivers stay far below). */
export const MAX_RECORDS = 50_000;

export class ReportRefused extends Error {}

/** A report record as parsed: its stored row (db/sql/dmarc-reports.ts) less `ours`, which ingest decides. */
export type ReportRecord = Omit<NewReportRow, 'ours'>;
export type DkimAuth = NewReportRow['dkimAuth'][number];

export interface AggregateReport {
  reporter: string;
  reportId: string;
  begin: Date;
  end: Date;
  policyDomain: string;
  records: ReportRecord[];
}

const GZIP = /\.(xml\.)?gz$|\.gzip$/i;
const ZIP = /\.zip$/i;
const XML = /\.xml$/i;

/** The report's XML from a whole message: the first attachment that is a report (by name or type). */
export async function reportXmlOf(raw: Buffer): Promise<string> {
  const parsed = await simpleParser(raw, { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true });
  for (const a of parsed.attachments) {
    const name = a.filename ?? '';
    const type = a.contentType.toLowerCase();
    if (GZIP.test(name) || type === 'application/gzip' || type === 'application/x-gzip') return gunzipCapped(a.content);
    if (ZIP.test(name) || type === 'application/zip' || type === 'application/x-zip-compressed') return unzipOne(a.content);
    if (XML.test(name) || type === 'text/xml' || type === 'application/xml') return capped(a.content);
  }
  throw new ReportRefused('no report attachment (.xml, .xml.gz or .zip)');
}

function capped(xml: Buffer): string {
  if (xml.length > MAX_XML_BYTES) throw new ReportRefused(`report larger than ${MAX_XML_BYTES} bytes`);
  return xml.toString('utf8');
}

/** zlib's maxOutputLength aborts the inflate as soon as the output passes the cap. */
function inflating(run: () => Buffer): Buffer {
  try {
    return run();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' || err instanceof RangeError) {
      throw new ReportRefused(`report inflates past ${MAX_XML_BYTES} bytes`);
    }
    throw new ReportRefused('compressed report is corrupt');
  }
}

export function gunzipCapped(gz: Buffer): string {
  return capped(inflating(() => gunzipSync(gz, { maxOutputLength: MAX_XML_BYTES })));
}

/**
 * The one .xml entry of a zip, read from its central directory (the local header only gives the
 * data's offset). Encrypted, ZIP64, multi-entry archives and methods other than store/deflate are refused.
 */
export function unzipOne(zip: Buffer): string {
  const eocd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (eocd < 0 || eocd + 22 > zip.length) throw new ReportRefused('not a zip archive');
  const entries = zip.readUInt16LE(eocd + 10);
  if (entries !== 1) throw new ReportRefused(`a zip report holds one entry, not ${entries}`);
  const cd = zip.readUInt32LE(eocd + 16);
  if (cd + 46 > zip.length || zip.readUInt32LE(cd) !== 0x02014b50) throw new ReportRefused('zip central directory unreadable');
  const flags = zip.readUInt16LE(cd + 8);
  const method = zip.readUInt16LE(cd + 10);
  const compressed = zip.readUInt32LE(cd + 20);
  const declared = zip.readUInt32LE(cd + 24);
  const name = zip.subarray(cd + 46, cd + 46 + zip.readUInt16LE(cd + 28)).toString('utf8');
  const local = zip.readUInt32LE(cd + 42);
  if (flags & 1) throw new ReportRefused('encrypted zip entry');
  if (!XML.test(name)) throw new ReportRefused('the zip entry is not an .xml file');
  if (compressed === 0xffffffff || declared === 0xffffffff) throw new ReportRefused('ZIP64 is not taken');
  if (declared > MAX_XML_BYTES) throw new ReportRefused(`zip entry declares ${declared} bytes, past ${MAX_XML_BYTES}`);
  if (declared > Math.max(compressed, 1) * MAX_RATIO) throw new ReportRefused('zip entry compression ratio past the cap');
  if (local + 30 > zip.length || zip.readUInt32LE(local) !== 0x04034b50) throw new ReportRefused('zip local header unreadable');
  const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
  const data = zip.subarray(start, start + compressed);
  if (data.length !== compressed) throw new ReportRefused('zip entry truncated');
  if (method === 0) return capped(data);
  if (method !== 8) throw new ReportRefused(`zip method ${method} is not taken`);
  const out = inflating(() => inflateRawSync(data, { maxOutputLength: MAX_XML_BYTES }));
  if (out.length > Math.max(compressed, 1) * MAX_RATIO) throw new ReportRefused('zip entry compression ratio past the cap');
  return capped(out);
}

const parser = new XMLParser({
  ignoreAttributes: true,
  removeNSPrefix: true,
  parseTagValue: false,
  processEntities: false,
  ignoreDeclaration: true,
  ignorePiTags: true,
});

type Node = Record<string, unknown>;
const list = (v: unknown): unknown[] => (v === undefined || v === null ? [] : Array.isArray(v) ? v : [v]);
const node = (v: unknown): Node => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Node) : {});

/** Entities are never expanded by the parser; the five predefined ones are decoded here, nothing else. */
function text(v: unknown, what: string, max = 255): string {
  const first = list(v)[0];
  if (typeof first !== 'string') throw new ReportRefused(`missing ${what}`);
  const s = first
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&')
    .trim();
  if (s.length === 0 || s.length > max) throw new ReportRefused(`${what} empty or too long`);
  if (/[\u0000-\u001f\u007f]/.test(s)) throw new ReportRefused(`${what} holds control characters`);
  return s;
}

const optText = (v: unknown, what: string): string =>
  list(v).length && typeof list(v)[0] === 'string' && list(v)[0] !== '' ? text(v, what) : '';

function epoch(v: unknown, what: string): Date {
  const s = text(v, what, 20);
  if (!/^\d{1,12}$/.test(s)) throw new ReportRefused(`${what} is not a Unix time`);
  return new Date(Number(s) * 1000);
}

function verdict(v: unknown, what: string): boolean {
  const s = text(v, what, 20).toLowerCase();
  if (s !== 'pass' && s !== 'fail') throw new ReportRefused(`${what} is ${s}, not pass or fail`);
  return s === 'pass';
}

const DISPOSITIONS = new Set(['none', 'quarantine', 'reject']);

/** An aggregate report's XML, checked against what RFC 7489 Appendix C requires of it. */
export function parseAggregateReport(xml: string): AggregateReport {
  // Reports never carry a DTD; refusing one outright keeps entity tricks out whatever the parser does.
  if (/<!DOCTYPE|<!ENTITY/i.test(xml)) throw new ReportRefused('a report with a DTD is refused');
  let doc: Node;
  try {
    doc = node(parser.parse(xml));
  } catch {
    throw new ReportRefused('report XML is not well formed');
  }
  const feedback = node(doc.feedback);
  const meta = node(feedback.report_metadata);
  const range = node(meta.date_range);
  const published = node(feedback.policy_published);
  const begin = epoch(range.begin, 'date_range begin');
  const end = epoch(range.end, 'date_range end');
  if (end < begin) throw new ReportRefused('date_range ends before it begins');
  const rows = list(feedback.record);
  if (rows.length === 0) throw new ReportRefused('report without records');
  if (rows.length > MAX_RECORDS) throw new ReportRefused(`report with more than ${MAX_RECORDS} records`);
  return {
    reporter: text(meta.org_name, 'org_name'),
    reportId: text(meta.report_id, 'report_id'),
    begin,
    end,
    policyDomain: text(published.domain, 'policy_published domain').toLowerCase(),
    records: rows.map(recordOf),
  };
}

function recordOf(v: unknown): ReportRecord {
  const r = node(v);
  const row = node(r.row);
  const evaluated = node(row.policy_evaluated);
  const sourceIp = text(row.source_ip, 'source_ip', 45);
  if (!isIP(sourceIp)) throw new ReportRefused('source_ip is not an IP address');
  const count = text(row.count, 'count', 10);
  if (!/^\d+$/.test(count) || Number(count) > 2_147_483_647) throw new ReportRefused('count is not a count');
  const disposition = text(evaluated.disposition, 'disposition', 20).toLowerCase();
  if (!DISPOSITIONS.has(disposition)) throw new ReportRefused(`disposition ${disposition} unknown`);
  return {
    sourceIp,
    count: Number(count),
    disposition,
    dkimAligned: verdict(evaluated.dkim, 'policy_evaluated dkim'),
    spfAligned: verdict(evaluated.spf, 'policy_evaluated spf'),
    headerFrom: text(node(r.identifiers).header_from, 'header_from').toLowerCase(),
    dkimAuth: list(node(r.auth_results).dkim)
      .slice(0, 20)
      .map((d) => {
        const a = node(d);
        return {
          domain: text(a.domain, 'dkim domain').toLowerCase(),
          selector: optText(a.selector, 'dkim selector').toLowerCase(),
          result: text(a.result, 'dkim result', 20).toLowerCase(),
        };
      }),
  };
}
