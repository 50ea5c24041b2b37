export interface ParsedAddress {
  name: string | null;
  /** The bare address, as given (trimmed). */
  address: string;
  /** Lower-cased bare address: the key for suppression, dedup and filters. */
  normalized: string;
  domain: string;
}

const LOCAL_RE = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+$/;
const DOMAIN_RE = /^(?=.{1,253}$)(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

export function parseBareAddress(s: string): ParsedAddress | null {
  const address = s.trim();
  if (address.length > 254 || /[\r\n]/.test(address)) return null;
  const at = address.lastIndexOf('@');
  if (at <= 0) return null;
  const local = address.slice(0, at);
  const domain = address.slice(at + 1);
  if (local.length > 64 || !LOCAL_RE.test(local) || local.startsWith('.') || local.endsWith('.') || local.includes('..')) return null;
  if (!DOMAIN_RE.test(domain)) return null;
  return { name: null, address, normalized: address.toLowerCase(), domain: domain.toLowerCase() };
}

/** `email` or `Name <email>`; no line breaks anywhere. */
export function parseAddress(s: string): ParsedAddress | null {
  if (/[\r\n]/.test(s)) return null;
  const m = /^\s*(.*?)\s*<([^<>]+)>\s*$/.exec(s);
  if (!m) return parseBareAddress(s);
  const rawName = m[1].replace(/^"(.*)"$/, '$1').trim();
  if (rawName.length > 256 || /[<>]/.test(rawName)) return null;
  const parsed = parseBareAddress(m[2]);
  if (!parsed) return null;
  return { ...parsed, name: rawName === '' ? null : rawName };
}
