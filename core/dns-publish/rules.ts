import type { DnsRecord } from '../../db/entities';

/**
 * What publishing a domain's records to its Cloudflare zone does, decided before any write: each
 * record of the domain's `records` list against the records the zone holds at its name. Pure, so
 * the rules (never touch a record the service did not create, never a second SPF or DMARC record)
 * are tested without a zone.
 */

/** The comment on every record the service writes: how it later knows the record is its own. */
export const MANAGED_COMMENT = 'managed by svc';

export type PublishType = 'TXT' | 'MX' | 'CNAME';

/** A record as the zone holds it (the fields of Cloudflare's DNS record the rules read). */
export interface ZoneRecord {
  id: string;
  type: string;
  name: string;
  content: string;
  priority?: number;
  comment?: string | null;
}

/** One record the service wants at a name. */
export interface Wanted {
  purpose: string;
  type: PublishType;
  name: string;
  /** TXT text, MX host or CNAME target. */
  content: string;
  /** MX only. */
  priority?: number;
}

export type Action =
  | { kind: 'create' }
  | { kind: 'update'; id: string }
  | { kind: 'unchanged'; id: string }
  /** Someone else's record already says exactly this: left as it is, nothing written. */
  | { kind: 'in_place'; id: string }
  | { kind: 'conflict'; reason: string };

export interface Step {
  wanted: Wanted;
  action: Action;
}

const host = (s: string) => s.trim().replace(/\.$/, '').toLowerCase();

/** A TXT record's text: Cloudflare may answer it quoted, in several 255-byte strings. */
export function txtText(content: string): string {
  const c = content.trim();
  if (!c.startsWith('"')) return c;
  const parts = [...c.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1].replace(/\\(.)/g, '$1'));
  return parts.join('');
}

/** `v=spf1`, `v=dmarc1`, `v=dkim1`, `v=stsv1`…: the kind of TXT record, of which a name holds one. */
const txtTag = (text: string) => /^v=([a-z0-9]+)/i.exec(text.trim())?.[1].toLowerCase() ?? null;

const squash = (s: string) => s.replace(/\s+/g, ' ').trim();

/** The domain's records as the zone should hold them (MX values are `<priority> <host>`). */
export function wantedRecords(records: DnsRecord[]): Wanted[] {
  return records.map((r) => {
    if (r.type === 'MX') {
      const [priority, exchange] = r.value.trim().split(/\s+/);
      return { purpose: r.purpose, type: 'MX', name: host(r.name), content: host(exchange ?? ''), priority: Number(priority) };
    }
    return { purpose: r.purpose, type: r.type, name: host(r.name), content: r.type === 'CNAME' ? host(r.value) : r.value.trim() };
  });
}

const managed = (r: ZoneRecord) => r.comment === MANAGED_COMMENT;

function same(w: Wanted, r: ZoneRecord): boolean {
  if (r.type !== w.type) return false;
  if (w.type === 'TXT') return squash(txtText(r.content)) === squash(w.content);
  if (w.type === 'MX') return host(r.content) === w.content && r.priority === w.priority;
  return host(r.content) === w.content;
}

/**
 * The records at the wanted record's name that it would stand beside as one of a kind: a CNAME
 * owns its name (no other record may share it); an MX shares its name only with other MX (the
 * return path's bounces must reach this service's host alone); a TXT with a `v=` tag shares it with
 * the TXT of the same tag (one SPF, one DMARC, one DKIM key per name: RFC 7208 §3.2, RFC 7489
 * §6.6.3); a TXT without one only with itself.
 */
function slot(w: Wanted, atName: ZoneRecord[]): ZoneRecord[] {
  if (w.type === 'CNAME') return atName;
  const cname = atName.filter((r) => r.type === 'CNAME');
  if (cname.length) return cname;
  if (w.type === 'MX') return atName.filter((r) => r.type === 'MX');
  const tag = txtTag(w.content);
  const txt = atName.filter((r) => r.type === 'TXT');
  return tag === null ? txt.filter((r) => same(w, r)) : txt.filter((r) => txtTag(txtText(r.content)) === tag);
}

const describe = (r: ZoneRecord) =>
  `${r.type} ${r.type === 'MX' ? `${r.priority ?? ''} ` : ''}${r.type === 'TXT' ? txtText(r.content) : r.content}`;

/** One wanted record against what its name holds in the zone. */
export function decide(w: Wanted, atName: ZoneRecord[]): Action {
  const holders = slot(
    w,
    atName.filter((r) => host(r.name) === w.name),
  );
  if (holders.length === 0) return { kind: 'create' };
  const foreign = holders.filter((r) => !managed(r));
  if (foreign.length) {
    const match = holders.length === 1 && same(w, foreign[0]) ? foreign[0] : null;
    if (match) return { kind: 'in_place', id: match.id };
    return { kind: 'conflict', reason: `a record the service did not create holds the name: ${describe(foreign[0])}` };
  }
  if (holders.length > 1)
    return { kind: 'conflict', reason: `${holders.length} records the service manages hold the name; remove all but one` };
  const own = holders[0];
  if (own.type !== w.type) return { kind: 'conflict', reason: `the service's ${own.type} record holds the name` };
  return same(w, own) ? { kind: 'unchanged', id: own.id } : { kind: 'update', id: own.id };
}

/** Every wanted record's step; a name the zone does not cover is the caller's to refuse. */
export function plan(wanted: Wanted[], zone: ZoneRecord[]): Step[] {
  return wanted.map((w) => ({ wanted: w, action: decide(w, zone) }));
}

/** The zone of a name among the token's zones: the longest that is the name or one of its parents. */
export function zoneFor<Z extends { name: string }>(name: string, zones: Z[]): Z | null {
  const n = host(name);
  const covering = zones.filter((z) => n === host(z.name) || n.endsWith(`.${host(z.name)}`));
  return covering.sort((a, b) => b.name.length - a.name.length)[0] ?? null;
}
