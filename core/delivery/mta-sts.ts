/**
 * MTA-STS as a sender (RFC 8461): reading the `_mta-sts` TXT record and the policy file, and
 * checking an MX host against a policy. Pure; the fetching and caching live in
 * activities/delivery/mta-sts-source.ts. A record or policy that does not parse means "no policy"
 * to the caller (RFC 8461 §3.1, §5), so these return null or an error instead of throwing.
 */

export type StsMode = 'enforce' | 'testing' | 'none';

export interface StsPolicy {
  /** The TXT record's id the policy was fetched under (a changed id means fetch again). */
  id: string;
  mode: StsMode;
  /** MX host patterns, lower-cased, without a trailing dot: "mail.example.com" or "*.example.com". */
  mx: string[];
  maxAgeSeconds: number;
}

/** The largest max_age RFC 8461 §3.2 allows: about one year. */
export const STS_MAX_AGE_LIMIT = 31_557_600;

// RFC 8461 §3.1 grammar.
const RECORD_DELIM = /[ \t]*;[ \t]*/;
const RECORD_FIELD = /^([A-Za-z0-9][A-Za-z0-9_.-]{0,31})=([\x21-\x3a\x3c\x3e-\x7e]+)$/;
const ID = /^[A-Za-z0-9]{1,32}$/;
const OURS = /^v=STSv1[ \t]*;/;

/**
 * The policy id from a domain's `_mta-sts` TXT answers (each answer's strings already joined):
 * records not starting "v=STSv1;" are someone else's and are ignored; exactly one must remain, well
 * formed, with an id of 1 to 32 letters and digits. Null otherwise: the domain has no usable policy
 * announcement (§3.1: with two records, the sender must assume there is none).
 */
export function parseStsRecord(txts: string[]): { id: string } | null {
  const ours = txts.filter((t) => OURS.test(t));
  if (ours.length !== 1) return null;
  const fields = ours[0].split(RECORD_DELIM);
  if (fields[0] !== 'v=STSv1') return null;
  // A single trailing ";" is allowed by the grammar; an empty field elsewhere is not.
  if (fields.length > 1 && fields[fields.length - 1] === '') fields.pop();
  let id: string | undefined;
  for (const field of fields.slice(1)) {
    const m = RECORD_FIELD.exec(field);
    if (!m) return null;
    if (m[1] === 'id') {
      if (id !== undefined || !ID.test(m[2])) return null;
      id = m[2];
    }
    // Other fields are extensions, to be ignored (§3.1).
  }
  return id === undefined ? null : { id };
}

// RFC 8461 §3.2 grammar: `name: value`, names case-sensitive.
const POLICY_LINE = /^([A-Za-z0-9][A-Za-z0-9_.-]{0,31}):[ \t]*([\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)[ \t]*$/;
const MODES: readonly string[] = ['enforce', 'testing', 'none'];
const LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const MX_PATTERN = new RegExp(`^(?:\\*\\.)?${LABEL}(?:\\.${LABEL})*$`);

/**
 * A policy file's body (the text at https://mta-sts.<domain>/.well-known/mta-sts.txt), fetched
 * under record id `id`. Lines end in CRLF or LF (§3.2 allows both); unknown fields are ignored;
 * a repeated field other than mx keeps its first value (§3.2). Required: version STSv1, a mode,
 * max_age (at most 31557600), and at least one mx unless the mode is none.
 */
export function parseStsPolicy(id: string, body: string): StsPolicy | { error: string } {
  const fields = new Map<string, string>();
  const mx: string[] = [];
  // A byte order mark is an editor's artefact, not part of the first field's name.
  const lines = body.replace(/^\uFEFF/, '').split(/\r?\n/);
  // The grammar allows one trailing line end; blank lines elsewhere carry nothing, so they are skipped rather than refused.
  for (const [i, line] of lines.entries()) {
    if (line.trim() === '') continue;
    const m = POLICY_LINE.exec(line);
    if (!m) return { error: `line ${i + 1} is not "name: value"` };
    const [, name, value] = m;
    if (name === 'mx') mx.push(value.toLowerCase().replace(/\.$/, ''));
    else if (!fields.has(name)) fields.set(name, value);
  }
  if (fields.get('version') !== 'STSv1') return { error: 'version is not STSv1' };
  const mode = fields.get('mode');
  if (mode === undefined || !MODES.includes(mode)) return { error: 'mode is not enforce, testing or none' };
  const maxAge = fields.get('max_age');
  if (maxAge === undefined || !/^[0-9]{1,10}$/.test(maxAge)) return { error: 'max_age is not a number of seconds' };
  const maxAgeSeconds = Number(maxAge);
  if (maxAgeSeconds > STS_MAX_AGE_LIMIT) return { error: `max_age is over ${STS_MAX_AGE_LIMIT}` };
  const bad = mx.find((p) => !MX_PATTERN.test(p));
  if (bad !== undefined) return { error: `mx ${JSON.stringify(bad)} is not a host name or "*." and a host name` };
  if (mx.length === 0 && mode !== 'none') return { error: 'no mx' };
  return { id, mode: mode as StsMode, mx, maxAgeSeconds };
}

/**
 * Whether an MX host is one the policy names (RFC 8461 §4.1): an exact name, or "*.example.com",
 * which stands for exactly one label more ("mail.example.com", not "example.com" nor
 * "a.b.example.com"). Case-insensitive; a trailing dot on either side is ignored.
 */
export function mxMatchesPolicy(policy: StsPolicy, host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  return policy.mx.some((raw) => {
    const p = raw.toLowerCase().replace(/\.$/, '');
    if (!p.startsWith('*.')) return h === p;
    const dot = h.indexOf('.');
    return dot > 0 && h.slice(dot + 1) === p.slice(2);
  });
}
