/**
 * Readers for the machine-readable part of a returned message: RFC 3464 delivery status
 * notifications and RFC 5965 feedback reports (ARF). mailparser folds a `message/delivery-status`
 * part into the text body, so the report part is found here, by walking the MIME tree of the raw
 * message, and read as the header-like field blocks both RFCs define.
 */

export type ReportType = 'delivery-status' | 'feedback-report';

/** Field blocks of a report: a name (lower-cased) to its unfolded value, one block per paragraph. */
export type FieldBlock = Map<string, string>;

/** Multipart nesting followed at most; a real report is two or three levels down. */
const MAX_DEPTH = 8;

/** The first report part of a message (depth first, in order), or null when it has none. */
export function findReport(raw: Buffer | string): { type: ReportType; blocks: FieldBlock[] } | null {
  return walk(typeof raw === 'string' ? raw : raw.toString('latin1'), 0);
}

function walk(entity: string, depth: number): { type: ReportType; blocks: FieldBlock[] } | null {
  const { headers, body } = splitEntity(entity);
  const type = parseContentType(headers.get('content-type') ?? 'text/plain');
  if (type.value === 'message/delivery-status' || type.value === 'message/global-delivery-status') {
    return { type: 'delivery-status', blocks: fieldBlocks(decode(body, headers)) };
  }
  if (type.value === 'message/feedback-report') return { type: 'feedback-report', blocks: fieldBlocks(decode(body, headers)) };
  if (!type.value.startsWith('multipart/') || depth >= MAX_DEPTH) return null;
  const boundary = type.params.get('boundary');
  if (!boundary) return null;
  for (const part of splitParts(body, boundary)) {
    const found = walk(part, depth + 1);
    if (found) return found;
  }
  return null;
}

/** Header fields (lower-cased names, unfolded values; the first of a repeated name) and the body. */
export function splitEntity(entity: string): { headers: Map<string, string>; body: string } {
  const m = /\r?\n\r?\n/.exec(entity);
  const head = m ? entity.slice(0, m.index) : entity;
  const body = m ? entity.slice(m.index + m[0].length) : '';
  return { headers: fieldBlocks(head)[0] ?? new Map(), body };
}

/** Paragraphs of `Name: value` lines (continuation lines folded in); lines without a colon are skipped. */
export function fieldBlocks(text: string): FieldBlock[] {
  const blocks: FieldBlock[] = [];
  let block: FieldBlock = new Map();
  let last: string | null = null;
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === '') {
      if (block.size) blocks.push(block);
      block = new Map();
      last = null;
    } else if (/^[ \t]/.test(line) && last !== null) {
      block.set(last, `${block.get(last)} ${line.trim()}`);
    } else {
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      last = line.slice(0, colon).trim().toLowerCase();
      if (!block.has(last)) block.set(last, line.slice(colon + 1).trim());
      else last = null; // a repeated field: the first one stands
    }
  }
  if (block.size) blocks.push(block);
  return blocks;
}

function parseContentType(value: string): { value: string; params: Map<string, string> } {
  const [main, ...rest] = value.split(';');
  const params = new Map<string, string>();
  for (const p of rest) {
    const eq = p.indexOf('=');
    if (eq < 0) continue;
    params.set(
      p.slice(0, eq).trim().toLowerCase(),
      p
        .slice(eq + 1)
        .trim()
        .replace(/^"(.*)"$/, '$1'),
    );
  }
  return { value: main.trim().toLowerCase(), params };
}

function splitParts(body: string, boundary: string): string[] {
  const lines = body.split(/\r?\n/);
  const parts: string[] = [];
  let current: string[] | null = null;
  for (const line of lines) {
    if (line.startsWith(`--${boundary}`)) {
      if (current) parts.push(current.join('\r\n'));
      if (line.startsWith(`--${boundary}--`)) return parts;
      current = [];
    } else if (current) {
      current.push(line);
    }
  }
  if (current) parts.push(current.join('\r\n'));
  return parts;
}

/** Reports are 7-bit text as a rule; base64 and quoted-printable ones are decoded all the same. */
function decode(body: string, headers: Map<string, string>): string {
  const cte = (headers.get('content-transfer-encoding') ?? '').toLowerCase();
  if (cte === 'base64') return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  if (cte === 'quoted-printable') {
    return body.replace(/=\r?\n/g, '').replace(/=([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
  }
  return body;
}
