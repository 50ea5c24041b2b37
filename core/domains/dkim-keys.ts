import { generateKeyPairSync, randomBytes } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { uuidv7 } from '../../db/ids';
import {
  insertPendingKey,
  listDkimKeys,
  revokePendingCompanions,
  revokePendingKey,
  type DkimKeyRow,
  type DkimKeyState,
} from '../../db/sql/dkim-keys';
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

export type DkimAlgorithm = DkimKeyRow['algorithm'];

export const dkimRecordName = (selector: string, domain: string) => `${selector}._domainkey.${domain}`;
export const dkimRecordValue = (publicKey: string, algorithm: DkimAlgorithm = 'rsa') => `v=DKIM1; k=${algorithm}; p=${publicKey}`;
/** What a revoked selector should publish: an empty key (RFC 6376 §3.6.1), so verifiers treat it as revoked. */
export const revokedRecordValue = (algorithm: DkimAlgorithm = 'rsa') => dkimRecordValue('', algorithm);

/**
 * A rotation's selector: dated, plus random letters, so it never repeats an earlier one (the
 * unique index is the last word) and a verifier's cache of an old selector cannot answer for it.
 */
export function rotationSelector(now: Date, random = randomBytes(3).toString('hex'), kind: 'r' | 'e' = 'r'): string {
  const day = now.toISOString().slice(0, 10).replace(/-/g, '');
  return `svc${day}${kind}${random}`;
}

/** An RSA-2048 key pair: the public key as the base64 DER a `p=` tag carries, the private key as PKCS#8 PEM. */
export function newRsaKey(): { publicKey: string; privateKeyPem: string } {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    publicKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

/**
 * An Ed25519 key pair (RFC 8463 §4.2): the `p=` of its record is the raw 32-byte public key in
 * base64 (not a DER structure as for RSA), the private key PKCS#8 PEM.
 */
export function newEd25519Key(): { publicKey: string; privateKeyPem: string } {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return {
    publicKey: publicKey.export({ type: 'spki', format: 'der' }).subarray(-32).toString('base64'),
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

export interface StartedRotation {
  keyId: string;
  selector: string;
  publicKey: string;
  /** The Ed25519 key signed alongside (asked for with `ed25519`), under its own selector. */
  ed25519?: { keyId: string; selector: string; publicKey: string };
}

/**
 * Starts a rotation: a new pending RSA key under a fresh selector and, with `ed25519`, an Ed25519
 * key under another (RFC 8463: signed alongside the RSA key, never instead of it; it switches,
 * retires and is revoked with it), audited with the operator as actor. Refused when the domain
 * has no active key (it sends unsigned) or a rotation is in progress. The caller starts the
 * workflow (on the RSA key) after this commits.
 */
export async function startDkimRotation(
  orm: Orm,
  secrets: Secrets,
  domain: RotationDomain,
  actor: string,
  now = new Date(),
  opts: { ed25519?: boolean } = {},
): Promise<StartedRotation> {
  const key = newRsaKey();
  const edKey = opts.ed25519 ? newEd25519Key() : null;
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
    let ed25519: StartedRotation['ed25519'];
    if (edKey) {
      const edId = uuidv7(now.getTime());
      const edSelector = rotationSelector(now, undefined, 'e');
      const edInserted = await insertPendingKey(em, {
        id: edId,
        domainId: domain.id,
        selector: edSelector,
        algorithm: 'ed25519',
        companionOf: id,
        publicKey: edKey.publicKey,
        privateKeyEnc: secrets.encrypt(edKey.privateKeyPem),
        now,
      });
      // A retiring Ed25519 key of an earlier rotation would hold the index; the read above refused that already.
      if (!edInserted) throw new DkimRotationRefused('in_progress');
      ed25519 = { keyId: edId, selector: edSelector, publicKey: edKey.publicKey };
    }
    em.persist(
      operatorAudit(
        domain.organizationId,
        'domain.dkim_rotation_started',
        { type: 'domain', id: domain.id },
        {
          key_id: id,
          selector,
          record: dkimRecordName(selector, domain.name),
          ...(ed25519
            ? {
                ed25519_key_id: ed25519.keyId,
                ed25519_selector: ed25519.selector,
                ed25519_record: dkimRecordName(ed25519.selector, domain.name),
              }
            : {}),
        },
        actor,
      ),
    );
    return { keyId: id, selector, publicKey: key.publicKey, ...(ed25519 ? { ed25519 } : {}) };
  });
}

/**
 * The console's cancel before the switch: the rotation's pending key (the RSA key its workflow
 * runs on) and its pending Ed25519 companion → revoked, audited; refused once the key is no
 * longer pending, or for a companion's id (the pair is canceled through its RSA key).
 */
export async function cancelDkimRotation(orm: Orm, domain: RotationDomain, keyId: string, actor: string, now = new Date()): Promise<void> {
  await orm.em.fork().transactional(async (em) => {
    const keys = await listDkimKeys(em, domain.id);
    if (!keys.some((k) => k.id === keyId && k.state === 'pending' && k.companion_of === null)) throw new DkimRotationRefused('not_pending');
    const revoked = await revokePendingKey(em, keyId, now);
    if (!revoked) throw new DkimRotationRefused('not_pending');
    const companions = await revokePendingCompanions(em, keyId, now);
    em.persist(
      operatorAudit(
        domain.organizationId,
        'domain.dkim_rotation_canceled',
        { type: 'domain', id: domain.id },
        {
          key_id: keyId,
          selector: revoked.selector,
          ...(companions.length
            ? { ed25519_key_ids: companions.map((c) => c.id), ed25519_selectors: companions.map((c) => c.selector) }
            : {}),
        },
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
