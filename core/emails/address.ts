/**
 * The one address parser: every address a client gives (from, reply_to, to, cc, bcc; later the
 * SMTP relay's headers) is exactly one mailbox, and the mailbox this returns is what the service
 * checks, stores as a recipient and writes into the header (activities build headers from it, never
 * from the raw string), so what was checked is what is sent.
 */
export interface Mailbox {
  /** The display name, unquoted and unescaped; null when none was given. */
  name: string | null;
  /** The bare address, as given (trimmed). */
  address: string;
  /** Lower-cased bare address: the key for suppression, de-duplication and filters. */
  normalized: string;
  /** Lower-cased domain. */
  domain: string;
}

const ATEXT = "A-Za-z0-9!#$%&'*+/=?^_`{|}~-";
/** A dot-atom local part: no quoted local parts, comments or source routes. */
const LOCAL_RE = new RegExp(`^[${ATEXT}]+(\\.[${ATEXT}]+)*$`);
/** A host name; no IP literals. */
const DOMAIN_RE = /^(?=.{1,253}$)(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
/**
 * An unquoted display name: words of letters (any script), digits, spaces, `.` and the atom
 * symbols. Refused unquoted: `,` (a second address), `:` `;` (a group), `(` `)` (a comment),
 * `@` `<` `>` `[` `]` `"` `\`.
 */
const PHRASE_RE = /^[\p{L}\p{M}\p{N}!#$%&'*+\-/=?^_`{|}~. ]*$/u;
/** Control characters, line breaks included: never in a header. */
const CONTROL_RE = /[\u0000-\u001f\u007f]/;
const MAX_NAME = 256;

/** `local@domain`, nothing else. */
export function parseAddrSpec(s: string): Mailbox | null {
  const address = s.trim();
  if (address.length > 254 || CONTROL_RE.test(address)) return null;
  const at = address.lastIndexOf('@');
  if (at <= 0) return null;
  const local = address.slice(0, at);
  const domain = address.slice(at + 1);
  if (local.length > 64 || !LOCAL_RE.test(local) || !DOMAIN_RE.test(domain)) return null;
  return { name: null, address, normalized: address.toLowerCase(), domain: domain.toLowerCase() };
}

/** `"quoted \"name\""` at the start of `s`: its unescaped content and what follows, or null. */
function quoted(s: string): { name: string; rest: string } | null {
  let name = '';
  for (let i = 1; i < s.length; i++) {
    const c = s[i];
    if (c === '\\') {
      if (i + 1 >= s.length) return null;
      name += s[++i];
    } else if (c === '"') {
      return { name, rest: s.slice(i + 1) };
    } else {
      name += c;
    }
  }
  return null;
}

/**
 * Exactly one mailbox: `local@domain`, `Display Name <local@domain>` or `"Any, Name" <local@domain>`.
 * Anything else is null: several addresses, groups, comments, more than one `<...>`, an unquoted
 * name with `@` or `,`, control characters or line breaks.
 */
export function parseMailbox(s: string): Mailbox | null {
  if (typeof s !== 'string' || CONTROL_RE.test(s)) return null;
  const t = s.trim();
  if (!t.includes('<') && !t.includes('>')) return parseAddrSpec(t);
  let name: string;
  let rest: string;
  if (t.startsWith('"')) {
    const q = quoted(t);
    if (!q) return null;
    name = q.name;
    rest = q.rest.trim();
  } else {
    const lt = t.indexOf('<');
    name = t.slice(0, lt).trim();
    rest = t.slice(lt);
    if (!PHRASE_RE.test(name)) return null;
  }
  const angle = /^<([^<>\s]+)>$/.exec(rest);
  if (!angle) return null;
  const mailbox = parseAddrSpec(angle[1]);
  if (!mailbox || name.length > MAX_NAME) return null;
  name = name.trim();
  return { ...mailbox, name: name === '' ? null : name };
}

/** A mailbox as `Name <local@domain>`, the name quoted and escaped only when it must be, or the bare address. */
export function formatMailbox(name: string | null, address: string): string {
  if (!name) return address;
  return PHRASE_RE.test(name) ? `${name} <${address}>` : `"${name.replace(/[\\"]/g, '\\$&')}" <${address}>`;
}
