import { generateKeyPairSync } from 'node:crypto';
import type { DnsRecord } from '../../db/entities';
import { createSecrets, deriveKey, loadSecretsKey, type Secrets } from '../secrets';
import { createReturnPaths, type ReturnPaths } from '../bounces/verp';
import { createRecipientLinks, type RecipientLinks } from '../recipient-links';
import { dmarcRecordName, dmarcRecordValue } from '../dmarc/ramp';

/** What a new domain publishes: a DKIM key under a selector, and a return-path host for bounces. */
export interface DomainIdentity {
  selector: string;
  publicKey: string;
  privateKeyPem: string;
  returnPathHost: string;
  records: DnsRecord[];
}

export interface PlatformDns {
  /** MX target of every return-path host: where bounces come back. */
  bounceMx: string;
  /** SPF include of every return-path host: the platform's sending addresses. */
  spfInclude: string;
  /** CNAME target of every tracking host: where open pixels and click redirects are answered. */
  trackingTarget: string;
}

/** The platform's own names every domain's return-path records point at. */
export function platformDns(mailDomain: string): PlatformDns {
  return { bounceMx: `feedback-smtp.${mailDomain}`, spfInclude: `_spf.${mailDomain}`, trackingTarget: `track.${mailDomain}` };
}

/**
 * What making and signing with domain identities needs, from configuration (SECRETS_KEY,
 * PLATFORM_MAIL_DOMAIN), and the recipients' signed links under PUBLIC_URL (`publicUrl`, which
 * defaults to http://localhost:PORT).
 */
export function identityDeps(config: { secretsKey: string | undefined; dataDir: string; platformMailDomain: string; publicUrl: string }): {
  secrets: Secrets;
  platform: PlatformDns;
  returnPaths: ReturnPaths;
  links: RecipientLinks;
  /** PUBLIC_URL (or the local address): MTA-STS hosting's records name its host. */
  publicBase: string;
} {
  const key = loadSecretsKey(config.secretsKey, config.dataDir);
  return {
    secrets: createSecrets(key),
    platform: platformDns(config.platformMailDomain),
    returnPaths: createReturnPaths(deriveKey(key, 'verp')),
    links: createRecipientLinks(key, config.publicUrl),
    publicBase: config.publicUrl,
  };
}

export function newDomainIdentity(domain: string, platform: PlatformDns, now = new Date()): DomainIdentity {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const der = publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  // Dated selectors let a later key rotation publish beside the current one.
  const selector = `svc${now.getUTCFullYear()}${String(now.getUTCMonth() + 1).padStart(2, '0')}`;
  const returnPathHost = `bounces.${domain}`;
  const record = (purpose: string, type: 'TXT' | 'MX', name: string, value: string, required = true): DnsRecord => ({
    purpose,
    type,
    name,
    value,
    required,
    observed: null,
    status: 'pending',
  });
  return {
    selector,
    publicKey: der,
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    returnPathHost,
    records: [
      record('dkim', 'TXT', `${selector}._domainkey.${domain}`, `v=DKIM1; k=rsa; p=${der}`),
      record('return_path_mx', 'MX', returnPathHost, `10 ${platform.bounceMx}`),
      record('return_path_spf', 'TXT', returnPathHost, `v=spf1 include:${platform.spfInclude} ~all`),
      // The rua= is where the inbound listener reads reports (issue 51): the ramp's records name it too.
      record('dmarc', 'TXT', dmarcRecordName(domain), dmarcRecordValue('none', returnPathHost), false),
    ],
  };
}

/**
 * The CNAME record of a domain's tracking host (issue 16): the host points at the platform's
 * tracking target. Not required: it never decides the domain's own status; tracking itself needs
 * this record `verified` (and the domain's `tracking_host`).
 */
export function trackingRecord(trackingHost: string, platform: PlatformDns): DnsRecord {
  return {
    purpose: 'tracking',
    type: 'CNAME',
    name: trackingHost,
    value: platform.trackingTarget,
    required: false,
    observed: null,
    status: 'pending',
  };
}

/** What DNS answered at a record's name. */
export type Lookup = { txt: string[] } | { mx: { exchange: string; priority: number }[] } | { cname: string[] } | { error: 'missing' };

const squash = (s: string) => s.replace(/\s+/g, '').toLowerCase();
const host = (s: string) => s.replace(/\.$/, '').toLowerCase();

/** Compares one record with what DNS answered; the rules are lenient where resolvers differ (spacing, case, trailing dots). */
export function evaluate(record: DnsRecord, lookup: Lookup): DnsRecord {
  if ('error' in lookup) return { ...record, observed: null, status: 'missing' };
  if ('mx' in lookup) {
    const observed = lookup.mx.map((m) => `${m.priority} ${host(m.exchange)}`).join(', ');
    const target = host(record.value.split(' ')[1]);
    return {
      ...record,
      observed: observed || null,
      status: lookup.mx.some((m) => host(m.exchange) === target) ? 'verified' : lookup.mx.length ? 'mismatch' : 'missing',
    };
  }
  if ('cname' in lookup) {
    const targets = lookup.cname.map(host);
    return {
      ...record,
      observed: targets.join(', ') || null,
      status: targets.includes(host(record.value)) ? 'verified' : targets.length ? 'mismatch' : 'missing',
    };
  }
  const observed = lookup.txt.join(' | ') || null;
  let ok: boolean;
  switch (record.purpose) {
    case 'dkim': {
      const want = /p=([^;]+)/.exec(record.value)![1];
      ok = lookup.txt.some((t) => /v=dkim1/i.test(t) && squash(/p=([^;]*)/.exec(t)?.[1] ?? '') === squash(want));
      break;
    }
    case 'return_path_spf': {
      const include = squash(/include:\S+/.exec(record.value)![0]);
      ok = lookup.txt.some((t) => /^v=spf1/i.test(t.trim()) && t.split(/\s+/).some((term) => squash(term) === include));
      break;
    }
    case 'dmarc': {
      // Any DMARC record will do for the default one; a ramp's step is published only when its policy is.
      const want = /;\s*p=(\w+)/i.exec(record.value)?.[1]?.toLowerCase();
      ok = lookup.txt.some((t) => /^v=dmarc1/i.test(t.trim()) && (!want || /;\s*p=(\w+)/i.exec(t)?.[1]?.toLowerCase() === want));
      break;
    }
    default:
      ok = lookup.txt.some((t) => squash(t) === squash(record.value));
  }
  return { ...record, observed, status: ok ? 'verified' : lookup.txt.length ? 'mismatch' : 'missing' };
}
