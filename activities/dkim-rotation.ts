import { LockMode } from '@mikro-orm/core';
import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { Domain, type DnsRecord } from '../db/entities';
import {
  readCompanions,
  readRotationKey,
  recordKeyCheck,
  revokePendingCompanions,
  revokePendingKey,
  revokeRetiringKeys,
  switchToKey,
  type DkimKeyRow,
} from '../db/sql/dkim-keys';
import type { DkimRotationActivities } from '../workflows/dkim-rotation';
import { operatorAudit } from '../core/limits/operator';
import { evaluate } from '../core/domains/identity';
import { lookup, type DnsResolver } from '../core/domains/dns';
import { dkimRecordName, dkimRecordValue } from '../core/domains/dkim-keys';
import type { Clock } from '../core/clock';
import type { Secrets } from '../core/secrets';
import { DKIM_PURPOSES, publishDomain } from '../core/dns-publish/publish';
import type { CloudflareSettings } from '../core/dns-publish/cloudflare';
import { isInternal, readConnection } from '../db/sql/cloudflare';

export interface DkimRotationDeps {
  orm: Orm;
  dns: DnsResolver;
  clock: Clock;
  log: Logger;
  /** Opens the organization's Cloudflare token; without it nothing is published. */
  secrets?: Secrets;
  /** The Cloudflare API publishing calls (CLOUDFLARE_API_BASE_URL); unset: Cloudflare's. */
  cloudflare?: CloudflareSettings;
}

const dkimRecord = (name: string, value: string): DnsRecord => ({
  purpose: 'dkim',
  type: 'TXT',
  name,
  value,
  required: true,
  observed: null,
  status: 'pending',
});

/** The workflow's own steps: audited with no actor (the system). */
const systemAudit = (organizationId: string, domainId: string, action: string, details: Record<string, unknown>) =>
  operatorAudit(organizationId, action, { type: 'domain', id: domainId }, details, null);

/**
 * One key's record through DNS: its `p=` must be the key's, and an Ed25519 key's record must say
 * `k=ed25519` (RFC 8463 §4.2; verifiers read `k=` to know the algorithm, rsa when absent).
 */
async function resolveKey(dns: DnsResolver, k: DkimKeyRow, domainName: string) {
  const record = dkimRecord(dkimRecordName(k.selector, domainName), dkimRecordValue(k.public_key, k.algorithm));
  const found = await lookup(dns, record);
  const seen = evaluate(record, found);
  const typed = k.algorithm === 'rsa' || ('txt' in found && found.txt.some((t) => /(^|;)\s*k\s*=\s*ed25519\s*(;|$)/i.test(t)));
  return { name: record.name, status: seen.status, observed: seen.observed, matches: seen.status === 'verified' && typed };
}

export function createDkimRotationActivities(deps: DkimRotationDeps): DkimRotationActivities {
  return {
    async checkDkimKey(keyId) {
      const em = deps.orm.em.fork();
      const key = await readRotationKey(em, keyId);
      if (!key || key.state !== 'pending') return { state: 'gone', matches: false };
      if (key.domain_deleted) {
        await revokePendingKey(em, keyId, deps.clock.now());
        await revokePendingCompanions(em, keyId, deps.clock.now());
        return { state: 'gone', matches: false };
      }
      // The rotation's Ed25519 key switches with the RSA key: a check matches only when both records
      // resolve, so neither signs before its record does.
      const keys = [key, ...(await readCompanions(em, keyId)).filter((c) => c.state === 'pending')];
      const seen = await Promise.all(keys.map((k) => resolveKey(deps.dns, k, key.domain_name)));
      const matches = seen.every((x) => x.matches);
      // The TTLs they are served with: the switch waits at least the longer (unknown: the minimum spread only).
      const ttls = matches && deps.dns.txtTtl ? await Promise.all(seen.map((x) => deps.dns.txtTtl!(x.name).catch(() => null))) : [];
      const known = ttls.filter((t): t is number => typeof t === 'number');
      const ttlSeconds = known.length ? Math.max(...known) : null;
      const now = deps.clock.now();
      for (const [i, k] of keys.entries()) await recordKeyCheck(em, k.id, matches, seen[i].observed, now);
      deps.log.info(
        {
          keyId,
          domainId: key.domain_id,
          selector: key.selector,
          status: seen[0].status,
          ...(keys.length > 1 ? { ed25519: keys.slice(1).map((k, i) => ({ selector: k.selector, status: seen[i + 1].status })) } : {}),
          ttlSeconds,
        },
        'dkim rotation: record checked',
      );
      return { state: 'pending', matches, ttlSeconds };
    },

    async switchDkimKey(keyId, retiringMs) {
      const now = deps.clock.now();
      return deps.orm.em.fork().transactional(async (em) => {
        const key = await readRotationKey(em, keyId);
        if (!key) return { switched: false, retiringKeyIds: [] };
        const retired = await switchToKey(em, keyId, now, new Date(now.getTime() + retiringMs));
        if (!retired) return { switched: false, retiringKeyIds: [] };
        // The domain's records name the signing key: the new one, checked already by this rotation.
        // Locked: a verification check writing `records` meanwhile retries on what this writes (core/domains/verification.ts).
        const domain = await em.findOneOrFail(Domain, { id: key.domain_id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        const record = dkimRecord(dkimRecordName(key.selector, key.domain_name), dkimRecordValue(key.public_key));
        domain.records = [
          { ...record, status: 'verified', observed: key.last_observed },
          ...domain.records.filter((r) => r.purpose !== 'dkim'),
        ];
        const companions = (await readCompanions(em, keyId)).filter((c) => c.state === 'active');
        em.persist(
          systemAudit(key.organization_id, key.domain_id, 'domain.dkim_rotation_switched', {
            key_id: keyId,
            selector: key.selector,
            ...(companions.length
              ? { ed25519_key_ids: companions.map((c) => c.id), ed25519_selectors: companions.map((c) => c.selector) }
              : {}),
            retiring_key_ids: retired,
          }),
        );
        deps.log.info({ keyId, domainId: key.domain_id, selector: key.selector, retired }, 'dkim rotation: signing switched');
        return { switched: true, retiringKeyIds: retired };
      });
    },

    async revokeDkimKeys(domainId, keyIds) {
      await deps.orm.em.fork().transactional(async (em) => {
        const revoked = await revokeRetiringKeys(em, domainId, keyIds, deps.clock.now());
        if (!revoked.length) return;
        const domain = await em.findOneOrFail(Domain, { id: domainId }, { fields: ['organizationId'] });
        em.persist(
          systemAudit(domain.organizationId, domainId, 'domain.dkim_rotation_revoked', {
            key_ids: revoked.map((r) => r.id),
            selectors: revoked.map((r) => r.selector),
          }),
        );
      });
    },

    async abandonDkimKey(keyId) {
      await deps.orm.em.fork().transactional(async (em) => {
        const key = await readRotationKey(em, keyId);
        const revoked = key && (await revokePendingKey(em, keyId, deps.clock.now()));
        if (!key || !revoked) return;
        await revokePendingCompanions(em, keyId, deps.clock.now());
        em.persist(
          systemAudit(key.organization_id, key.domain_id, 'domain.dkim_rotation_canceled', {
            key_id: keyId,
            selector: key.selector,
            reason: 'the record did not resolve within the rotation window',
          }),
        );
      });
    },

    async publishDkimRecords(domainId) {
      try {
        const domain = await deps.orm.em.fork().findOne(Domain, { id: domainId, deletedAt: null }, { fields: ['organizationId'] });
        if (!domain || !deps.secrets) return { published: false };
        const org = domain.organizationId;
        if (!(await isInternal(deps.orm, org)) || !(await readConnection(deps.orm, org))) return { published: false };
        const p = { orm: deps.orm, secrets: deps.secrets, dns: deps.dns, cloudflare: deps.cloudflare ?? {} };
        const outcomes = await publishDomain(p, org, domainId, null, { only: DKIM_PURPOSES });
        deps.log.info({ domainId, records: outcomes.map((o) => `${o.purpose}:${o.action}`) }, 'dkim rotation: records published');
        return { published: true };
      } catch (err) {
        deps.log.warn({ err, domainId }, 'dkim rotation: publishing to Cloudflare failed; the checks wait for DNS');
        return { published: false };
      }
    },
  };
}
