import { LockMode } from '@mikro-orm/core';
import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { Domain, type DnsRecord } from '../db/entities';
import { readRotationKey, recordKeyCheck, revokePendingKey, revokeRetiringKeys, switchToKey } from '../db/sql/dkim-keys';
import type { DkimRotationActivities } from '../workflows/dkim-rotation';
import { operatorAudit } from '../core/limits/operator';
import { evaluate } from '../core/domains/identity';
import { lookup, type DnsResolver } from '../core/domains/dns';
import { dkimRecordName, dkimRecordValue } from '../core/domains/dkim-keys';
import type { Clock } from '../core/clock';

export interface DkimRotationDeps {
  orm: Orm;
  dns: DnsResolver;
  clock: Clock;
  log: Logger;
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

export function createDkimRotationActivities(deps: DkimRotationDeps): DkimRotationActivities {
  return {
    async checkDkimKey(keyId) {
      const em = deps.orm.em.fork();
      const key = await readRotationKey(em, keyId);
      if (!key || key.state !== 'pending') return { state: 'gone', matches: false };
      if (key.domain_deleted) {
        await revokePendingKey(em, keyId, deps.clock.now());
        return { state: 'gone', matches: false };
      }
      const record = dkimRecord(dkimRecordName(key.selector, key.domain_name), dkimRecordValue(key.public_key));
      const seen = evaluate(record, await lookup(deps.dns, record));
      const matches = seen.status === 'verified';
      await recordKeyCheck(em, keyId, matches, seen.observed, deps.clock.now());
      deps.log.info({ keyId, domainId: key.domain_id, selector: key.selector, status: seen.status }, 'dkim rotation: record checked');
      return { state: 'pending', matches };
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
        em.persist(
          systemAudit(key.organization_id, key.domain_id, 'domain.dkim_rotation_switched', {
            key_id: keyId,
            selector: key.selector,
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
        em.persist(
          systemAudit(key.organization_id, key.domain_id, 'domain.dkim_rotation_canceled', {
            key_id: keyId,
            selector: key.selector,
            reason: 'the record did not resolve within the rotation window',
          }),
        );
      });
    },
  };
}
