import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { spamassassin, type SpamReport } from './spamassassin';

/**
 * A receiving system's verdict on one raw message (issue 50): SpamAssassin's local rules, DKIM by
 * mailauth against the published records, and the structure RFC 5322 and MIME ask for. Every
 * check reports what it found, so a failing test says which rule a message broke.
 */

/** Structural rules: they fire on how a message is built, never on what it says. */
const STRUCTURAL = [
  /^MIME_/,
  /^MISSING_/,
  /^INVALID_/,
  /^MSGID_/,
  /^MPART_ALT_DIFF/,
  /^HTML_MIME_NO_HTML_TAG$/,
  /^DATE_IN_(PAST|FUTURE)/,
  /^BASE64_LENGTH_/,
  /^TO_NO_BRKTS_/,
  /^FROM_EXCESS_BASE64$/,
  /^HEADER_FROM_DIFFERENT_DOMAINS$/,
  /^CTE_8BIT_MISMATCH$/,
  /^__?MIME_QP_LONG_LINE/,
];

/** The largest SpamAssassin score (local rules) a message of ordinary content may have. */
export const MAX_SPAM_SCORE = 1.0;

export interface Verdict {
  spam: SpamReport;
  /** Each broken rule, in words; empty when the message passes. */
  problems: string[];
  /** The header fields, unfolded, lower-case names, in order. */
  headers: [string, string][];
}

export type Resolve = (name: string, rrtype: string) => Promise<unknown>;

const RFC5322_DATE =
  /^(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), )?\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}(?::\d{2})? [+-]\d{4}$/;

/** The header fields of a header section, unfolded. */
export function headerFields(section: string): [string, string][] {
  return section
    .replace(/\r\n[ \t]/g, ' ')
    .split('\r\n')
    .filter(Boolean)
    .map((line) => {
      const colon = line.indexOf(':');
      return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
    });
}

interface Part {
  headers: [string, string][];
  body: Buffer;
}

const field = (headers: [string, string][], name: string) => headers.find(([n]) => n === name)?.[1];

/** Splits a message (or a part) into its header fields and its body, at the first empty line. */
function split(raw: Buffer): Part {
  const at = raw.indexOf('\r\n\r\n');
  if (at < 0) return { headers: headerFields(raw.toString('latin1')), body: Buffer.alloc(0) };
  return { headers: headerFields(raw.subarray(0, at).toString('latin1')), body: raw.subarray(at + 4) };
}

/** The leaf parts of a MIME entity, each with the chain of multipart types above it. */
function leaves(entity: Part, parents: string[] = []): (Part & { parents: string[] })[] {
  const type = field(entity.headers, 'content-type') ?? 'text/plain';
  const boundary = /boundary="?([^";]+)"?/i.exec(type)?.[1];
  if (!/^multipart\//i.test(type) || !boundary) return [{ ...entity, parents }];
  const text = entity.body.toString('latin1');
  const delimiter = `--${boundary}`;
  const pieces = text.split(new RegExp(`(?:^|\\r\\n)${delimiter.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?:--)?[ \\t]*(?:\\r\\n|$)`));
  // Before the first delimiter is the preamble, after the last the epilogue.
  return pieces.slice(1, -1).flatMap((p) => leaves(split(Buffer.from(p, 'latin1')), [...parents, type.split(';')[0].trim().toLowerCase()]));
}

export async function judge(raw: Buffer, resolve: Resolve): Promise<Verdict> {
  const problems: string[] = [];
  const spam = await spamassassin(raw);
  if (spam.score > MAX_SPAM_SCORE) problems.push(`SpamAssassin score ${spam.score} > ${MAX_SPAM_SCORE}: ${[...spam.rules].join(', ')}`);
  for (const [rule, points] of spam.rules) {
    if (STRUCTURAL.some((r) => r.test(rule))) problems.push(`structural SpamAssassin rule ${rule} (${points})`);
  }

  // RFC 5322 §2.1.1: no line longer than 998 octets, header or body; lines end in CRLF.
  const lines = raw.toString('latin1').split('\r\n');
  const long = lines.findIndex((l) => l.length > 998);
  if (long >= 0) problems.push(`line ${long + 1} is ${lines[long].length} octets (998 at most)`);
  if (lines.some((l) => l.includes('\n') || l.includes('\r'))) problems.push('a bare CR or LF (lines end in CRLF)');

  const top = split(raw);
  const count = (name: string) => top.headers.filter(([n]) => n === name).length;
  for (const name of ['message-id', 'date', 'from', 'subject', 'mime-version']) {
    if (count(name) !== 1) problems.push(`${count(name)} ${name} headers (exactly one)`);
  }
  const date = field(top.headers, 'date') ?? '';
  if (!RFC5322_DATE.test(date)) problems.push(`Date "${date}" is not RFC 5322's date-time`);
  else if (Math.abs(Date.parse(date) - Date.now()) > 86_400_000) problems.push(`Date "${date}" is more than a day from now`);
  if (!/^<[^<>@\s]+@[^<>@\s]+>$/.test(field(top.headers, 'message-id') ?? '')) problems.push('Message-ID is not one <id@host>');

  // Each part's transfer encoding fits its bytes: 8-bit bytes only where 8bit/binary is declared.
  const parts = leaves(top);
  for (const p of parts) {
    const cte = (field(p.headers, 'content-transfer-encoding') ?? '7bit').toLowerCase();
    const eightBit = p.body.some((b) => b >= 0x80);
    if (eightBit && cte !== '8bit' && cte !== 'binary') problems.push(`a ${cte} part holds 8-bit bytes`);
    if (!['7bit', '8bit', 'quoted-printable', 'base64', 'binary'].includes(cte)) problems.push(`unknown transfer encoding ${cte}`);
  }
  // Html travels with its text alternative.
  for (const p of parts) {
    const type = (field(p.headers, 'content-type') ?? '').toLowerCase();
    if (type.startsWith('text/html') && !field(p.headers, 'content-disposition')?.startsWith('attachment')) {
      const alternative = p.parents.includes('multipart/alternative');
      const text = parts.some((q) => (field(q.headers, 'content-type') ?? '').toLowerCase().startsWith('text/plain'));
      if (!alternative || !text) problems.push('an html part without a text/plain alternative (multipart/alternative)');
    }
  }

  // DKIM: a passing signature of the From domain (or its parent: relaxed alignment).
  const fromDomain = /@([^>\s]+)>?\s*$/.exec(field(top.headers, 'from') ?? '')?.[1]?.toLowerCase() ?? '';
  const dkim = await dkimVerify(raw, { resolver: resolve as never });
  const aligned = dkim.results.filter((r: { status: { result: string }; signingDomain?: string }) => {
    const d = (r.signingDomain ?? '').toLowerCase();
    return r.status.result === 'pass' && d !== '' && (d === fromDomain || fromDomain.endsWith(`.${d}`));
  });
  if (aligned.length === 0) {
    problems.push(
      `no passing DKIM signature aligned with ${fromDomain}: ${JSON.stringify(dkim.results.map((r: { status: unknown }) => r.status))}`,
    );
  }
  return { spam, problems, headers: top.headers };
}

/** The names a message's first passing DKIM signature covers (its h= tag), lower case. */
export function signedHeaders(raw: Buffer): string[] {
  const section = raw.subarray(0, raw.indexOf('\r\n\r\n')).toString('latin1');
  const signature = headerFields(section).find(([n]) => n === 'dkim-signature')?.[1] ?? '';
  return (/\bh=([^;]+)/.exec(signature.replace(/\s+/g, ''))?.[1] ?? '').toLowerCase().split(':').filter(Boolean);
}
