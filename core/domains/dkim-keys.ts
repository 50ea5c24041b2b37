import { generateKeyPairSync, randomBytes } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import { insertPendingKey, listDkimKeys, revokePendingKey, type DkimKeyRow, type DkimKeyState } from '../../db/sql/dkim-keys';
import type { DkimRotationInput } from '../../workflows/dkim-rotation';
import { operatorAudit } from '../limits/operator';
import type { Secrets } from '../secrets';

/** DKIM_* settings, as server/config.ts reads them. */
export interface DkimRotationConfig {
  checkIntervalSeconds: number;
  minSpreadSeconds: number;
  retiringHours: number;
  windowHours: number;
}

export type DkimRotationTiming = Omit<DkimRotationInput, 'domainId' | 'keyId'>;

/**
 * 3 checks over at least 5 minutes (a common TTL of a new record; resolvers caching a negative
 * answer longer are covered by the spread), then 7 days retiring: longer than a message may wait
 * in a queue and be verified on arrival (RFC 5321 §4.5.4.1 suggests giving up after 4-5 days).
 */
export const DKIM_ROTATION_DEFAULTS: DkimRotationConfig = {
  checkIntervalSeconds: 120,
  minSpreadSeconds: 300,
  retiringHours: 168,
  windowHours: 336,
};

export function dkimRotationTiming(config: DkimRotationConfig = DKIM_ROTATION_DEFAULTS): DkimRotationTiming {
  return {
    checkIntervalMs: config.checkIntervalSeconds * 1000,
    requiredChecks: 3,
    minSpreadMs: config.minSpreadSeconds * 1000,
    retiringMs: config.retiringHours * 3_600_000,
    windowMs: config.windowHours * 3_600_000,
  };
}

/** The moves a key may make; the conditional updates in db/sql/dkim-keys.ts are these and no others. */
export const DKIM_KEY_MOVES: Record<DkimKeyState, DkimKeyState[]> = {
  pending: ['active', 'revoked'],
  active: ['retiring'],
  retiring: ['revoked'],
  revoked: [],
};

/** What a revoked selector should publish: an empty key (RFC 6376 §3.6.1), so verifiers treat it as revoked. */
export const REVOKED_RECORD_VALUE = 'v=DKIM1; p=';

export const dkimRecordName = (selector: string, domain: string) => `${selector}._domainkey.${domain}`;
export const dkimRecordValue = (publicKey: string) => `v=DKIM1; k=rsa; p=${publicKey}`;

/**
 * A rotation's selector: dated, plus random letters, so it never repeats an earlier one (the
 * unique index is the last word) and a verifier's cache of an old selector cannot answer for it.
 */
export function rotationSelector(now: Date, random = randomBytes(3).toString('hex')): string {
  const day = now.toISOString().slice(0, 10).replace(/-/g, '');
  return `svc${day}r${random}`;
}

/** An RSA-2048 key pair: the public key as the base64 DER a `p=` tag carries, the private key as PKCS#8 PEM. */
export function newRsaKey(): { publicKey: string; privateKeyPem: string } {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    publicKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

export class DkimRotationRefused extends Error {
  constructor(readonly reason: 'no_key' | 'in_progress' | 'not_pending') {
    super(reason);
  }
}

export interface RotationDomain {
  id: string;
  organizationId: string;
  name: string;
}

/**
 * Starts a rotation: a new pending key under a fresh selector, audited with the operator as actor.
 * Refused when the domain has no active key (it sends unsigned) or a rotation is in progress. The
 * caller starts the workflow after this commits.
 */
export async function startDkimRotation(
  orm: Orm,
  secrets: Secrets,
  domain: RotationDomain,
  actor: string,
  now = new Date(),
): Promise<{ keyId: string; selector: string; publicKey: string }> {
  const key = newRsaKey();
  return orm.em.fork().transactional(async (em) => {
    const keys = await listDkimKeys(em, domain.id);
    if (!keys.some((k) => k.state === 'active')) throw new DkimRotationRefused('no_key');
    if (keys.some((k) => k.state === 'pending' || k.state === 'retiring')) throw new DkimRotationRefused('in_progress');
    const id = uuidv7(now.getTime());
    const selector = rotationSelector(now);
    const inserted = await insertPendingKey(em, {
      id,
      domainId: domain.id,
      selector,
      publicKey: key.publicKey,
      privateKeyEnc: secrets.encrypt(key.privateKeyPem),
      now,
    });
    // Another operator's start won the index between our read and this insert.
    if (!inserted) throw new DkimRotationRefused('in_progress');
    em.persist(
      operatorAudit(
        domain.organizationId,
        'domain.dkim_rotation_started',
        { type: 'domain', id: domain.id },
        { key_id: id, selector, record: dkimRecordName(selector, domain.name) },
        actor,
      ),
    );
    return { keyId: id, selector, publicKey: key.publicKey };
  });
}

/** The console's cancel before the switch: pending → revoked, audited; refused once the key is no longer pending. */
export async function cancelDkimRotation(orm: Orm, domain: RotationDomain, keyId: string, actor: string, now = new Date()): Promise<void> {
  await orm.em.fork().transactional(async (em) => {
    const keys = await listDkimKeys(em, domain.id);
    if (!keys.some((k) => k.id === keyId && k.state === 'pending')) throw new DkimRotationRefused('not_pending');
    const revoked = await revokePendingKey(em, keyId, now);
    if (!revoked) throw new DkimRotationRefused('not_pending');
    em.persist(
      operatorAudit(
        domain.organizationId,
        'domain.dkim_rotation_canceled',
        { type: 'domain', id: domain.id },
        { key_id: keyId, selector: revoked.selector },
        actor,
      ),
    );
  });
}

export function domainDkimKeys(orm: Orm, domainId: string): Promise<DkimKeyRow[]> {
  return listDkimKeys(orm.em.fork(), domainId);
}

/** A rotation is in progress from its start until its retiring key is revoked (the DMARC ramp waits for it). */
export async function dkimRotationInProgress(orm: Orm, domainId: string): Promise<boolean> {
  return (await domainDkimKeys(orm, domainId)).some((k) => k.state === 'pending' || k.state === 'retiring');
}
