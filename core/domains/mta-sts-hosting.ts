import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../../db/orm';
import { Domain, type DnsRecord } from '../../db/entities';
import { operatorAudit } from '../limits/operator';
import { insertHosting, readHosting, reissueHosting, replaceRecords, type HostedMode, type HostingRow } from '../../db/sql/mta-sts-hosting';

/**
 * MTA-STS hosting (RFC 8461) for the return-path hosts whose MX is this service's inbound
 * listener: the policy served at https://mta-sts.<host>/.well-known/mta-sts.txt, the records that
 * announce it (`_mta-sts` TXT with the policy id, RFC 8461 §3.1) and ask for TLS reports
 * (`_smtp._tls` TXT, RFC 8460 §3), and the one write: a platform operator's change of mode.
 */

export type { HostedMode, HostingRow };
export const HOSTED_MODES: readonly HostedMode[] = ['testing', 'enforce'];

/**
 * How long senders may cache the policy. Short while testing, so the move to enforce reaches them
 * within a day; a week when enforcing (RFC 8461 §3.2 suggests weeks: a cached policy is what
 * protects against a downgrade, and a new id makes senders fetch again at once anyway).
 */
export const MAX_AGE: Record<HostedMode, number> = { testing: 86_400, enforce: 604_800 };

/** The records this file owns in a domain's `records`; never required for the domain's verification. */
export const HOSTING_PURPOSES: readonly string[] = ['mta_sts_host', 'mta_sts', 'tls_rpt'];

/** 1 to 32 letters and digits (RFC 8461 §3.1): the UTC time, then random so two changes in one second differ. */
export function newPolicyId(now: Date): string {
  const stamp = now.toISOString().replace(/\D/g, '').slice(0, 14);
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  const random = [...randomBytes(10)].map((b) => alphabet[b % alphabet.length]).join('');
  return `${stamp}${random}`;
}

/** Names a host in its `rua=` URL: unguessable, so reports cannot be posted for hosts by enumeration. */
export const newReportToken = () => randomBytes(16).toString('hex');

/** The policy file's body (RFC 8461 §3.2), CRLF line ends. */
export function policyText(h: { mode: HostedMode; mx: string }): string {
  return `version: STSv1\r\nmode: ${h.mode}\r\nmx: ${h.mx}\r\nmax_age: ${MAX_AGE[h.mode]}\r\n`;
}

/** The return-path host a policy request's Host names (`mta-sts.<host>`), or null. */
export function hostOfPolicyRequest(hostname: string): string | null {
  const h = hostname.trim().toLowerCase().replace(/\.$/, '');
  const m = /^mta-sts\.([a-z0-9-]+(?:\.[a-z0-9-]+)+)$/.exec(h);
  return m ? m[1] : null;
}

/** The HTTPS address TLS reports are posted to (RFC 8460 §3: `https:` only), under PUBLIC_URL's host. */
export function reportUrl(publicBase: string, token: string): string {
  return `https://${new URL(publicBase).host}/tlsrpt/${token}`;
}

/** The three records of a hosted host: the policy host's CNAME to this service, and the two TXT records. */
export function hostingRecords(h: Pick<HostingRow, 'host' | 'policyId' | 'reportToken'>, publicBase: string): DnsRecord[] {
  const record = (purpose: string, type: 'TXT' | 'CNAME', name: string, value: string): DnsRecord => ({
    purpose,
    type,
    name,
    value,
    required: false,
    observed: null,
    status: 'pending',
  });
  return [
    record('mta_sts_host', 'CNAME', `mta-sts.${h.host}`, new URL(publicBase).hostname),
    record('mta_sts', 'TXT', `_mta-sts.${h.host}`, `v=STSv1; id=${h.policyId}`),
    record('tls_rpt', 'TXT', `_smtp._tls.${h.host}`, `v=TLSRPTv1; rua=${reportUrl(publicBase, h.reportToken)}`),
  ];
}

/** The exchange of a domain's return-path MX record ("10 feedback-smtp.example" → the name), or null. */
export function returnPathMx(records: DnsRecord[]): string | null {
  const mx = records.find((r) => r.purpose === 'return_path_mx');
  const name = mx?.value.trim().split(/\s+/)[1];
  return name ? name.toLowerCase().replace(/\.$/, '') : null;
}

/**
 * `records` with the hosting records as `mine` says, or null when nothing changes. A record whose
 * value is unchanged keeps what the last check observed; a changed one is checked again.
 */
export function withHostingRecords(records: DnsRecord[], mine: DnsRecord[]): DnsRecord[] | null {
  const same = (a: DnsRecord, b: DnsRecord) => a.type === b.type && a.name === b.name && a.value === b.value;
  const merged = mine.map((m) => {
    const old = records.find((r) => r.purpose === m.purpose);
    return old && same(old, m) ? old : m;
  });
  const next = [...records.filter((r) => !HOSTING_PURPOSES.includes(r.purpose)), ...merged];
  return JSON.stringify(next) === JSON.stringify(records) ? null : next;
}

/** Writes the hosting records into a domain's `records`, against a racing verification check. */
async function syncRecords(orm: Orm, domainId: string, h: HostingRow, publicBase: string): Promise<DnsRecord[]> {
  for (let attempt = 0; ; attempt++) {
    const em = orm.em.fork();
    const d = await em.findOne(Domain, { id: domainId });
    if (!d) return [];
    const next = withHostingRecords(d.records, hostingRecords(h, publicBase));
    if (next === null) return d.records;
    if (await replaceRecords(em, domainId, d.records, next)) return next;
    // A check wrote in between: the next check (or ensureHosting call) writes them if this keeps losing.
    if (attempt >= 2) return d.records;
  }
}

async function liveDomainsOf(em: EntityManager, host: string): Promise<Domain[]> {
  return em.find(Domain, { returnPathHost: host, deletedAt: null });
}

export interface DomainHosting {
  /** Only a verified domain's host is hosted: a namesake that never proved the DNS sees nothing of it. */
  verified: boolean;
  verifiedAt: Date | null;
  host: string;
  hosting: HostingRow | null;
  /** The return path's MX is not the policy's: a new id is issued at the next check (or on request). */
  mxChanged: boolean;
}

/** What the domain's page shows, read only (a page view never writes); null without a return path of its own. */
export async function domainHosting(orm: Orm, domainId: string): Promise<DomainHosting | null> {
  const em = orm.em.fork();
  const d = await em.findOne(Domain, { id: domainId, deletedAt: null });
  const mx = d && returnPathMx(d.records);
  if (!d?.returnPathHost || !mx) return null;
  const verified = d.status === 'verified';
  const host = d.returnPathHost.toLowerCase();
  const hosting = verified ? await readHosting(em, host) : null;
  return { verified, verifiedAt: d.verifiedAt, host, hosting, mxChanged: !!hosting && hosting.mx !== mx };
}

/**
 * A verified domain's hosting as it should be now, made so: the host's policy (the first one,
 * `testing`, when the host has none yet; a new id when its return-path MX changed), and its
 * records in the domain's `records`. Run when a check verifies the domain (core/domains/verification.ts)
 * and on the console's explicit request, never on a page view. Null for a domain not verified or
 * without a return path of its own.
 */
export async function ensureHosting(
  orm: Orm,
  domainId: string,
  publicBase: string,
  now = new Date(),
  actor: string | null = null,
): Promise<HostingRow | null> {
  const em = orm.em.fork();
  const d = await em.findOne(Domain, { id: domainId, deletedAt: null });
  const mx = d && returnPathMx(d.records);
  if (!d?.returnPathHost || !mx || d.status !== 'verified') return null;
  const host = d.returnPathHost.toLowerCase();
  let h = await readHosting(em, host);
  const changed = !h || h.mx !== mx;
  if (!h) {
    const fresh: HostingRow = { host, mode: 'testing', mx, policyId: newPolicyId(now), reportToken: newReportToken(), changedAt: now };
    await orm.em.fork().transactional(async (tx) => {
      if (!(await insertHosting(tx, fresh))) return;
      const details = { host, mode: fresh.mode, policy_id: fresh.policyId };
      tx.persist(operatorAudit(d.organizationId, 'domain.mta_sts_hosted', { type: 'domain', id: d.id }, details, actor));
    });
  } else if (h.mx !== mx) {
    const policyId = newPolicyId(now);
    await orm.em.fork().transactional(async (tx) => {
      if (!(await reissueHosting(tx, { host, fromPolicyId: h!.policyId, mode: h!.mode, mx, policyId, at: now }))) return;
      const details = { host, mx: { from: h!.mx, to: mx }, policy_id: policyId };
      tx.persist(operatorAudit(d.organizationId, 'domain.mta_sts_policy_changed', { type: 'domain', id: d.id }, details, actor));
    });
  }
  // Read again only after a write (this one's, or a concurrent one's that won the insert or reissue).
  if (changed) h = await readHosting(em, host);
  if (h) await syncRecords(orm, d.id, h, publicBase);
  return h;
}

export type ModeChange = { changed: true; hosting: HostingRow } | { changed: false; hosting: HostingRow | null };

/**
 * A platform operator's move of a host's policy between testing and enforce: a new id each time,
 * audited in each organization whose domain has that return path (they share the one policy).
 * The same mode again changes nothing.
 */
export async function setHostingMode(
  orm: Orm,
  q: { domainId: string; mode: HostedMode; publicBase: string; now?: Date },
  actor: string | null,
): Promise<ModeChange> {
  const now = q.now ?? new Date();
  for (let attempt = 0; attempt < 3; attempt++) {
    const h = await ensureHosting(orm, q.domainId, q.publicBase, now);
    if (!h || h.mode === q.mode) return { changed: false, hosting: h };
    const policyId = newPolicyId(now);
    const domains = await orm.em.fork().transactional(async (tx) => {
      if (!(await reissueHosting(tx, { host: h.host, fromPolicyId: h.policyId, mode: q.mode, mx: h.mx, policyId, at: now }))) return null;
      const live = await liveDomainsOf(tx, h.host);
      const details = { host: h.host, from: h.mode, to: q.mode, policy_id: policyId };
      for (const d of live)
        tx.persist(operatorAudit(d.organizationId, 'domain.mta_sts_mode_set', { type: 'domain', id: d.id }, details, actor));
      return live;
    });
    // Another change won the race: decide again from what it left.
    if (!domains) continue;
    const hosting: HostingRow = { ...h, mode: q.mode, policyId, changedAt: now };
    for (const d of domains) await syncRecords(orm, d.id, hosting, q.publicBase);
    return { changed: true, hosting };
  }
  return { changed: false, hosting: null };
}
