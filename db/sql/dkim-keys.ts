import type { EntityManager } from '@mikro-orm/postgresql';
import { runSql } from './run';
import type { PgTimestamp } from './pg-types';

export type DkimKeyState = 'pending' | 'active' | 'retiring' | 'revoked';

/** A key as the console shows it: never its private key. */
export interface DkimKeyRow {
  id: string;
  domain_id: string;
  selector: string;
  algorithm: 'rsa' | 'ed25519';
  public_key: string;
  state: DkimKeyState;
  rotation_id: string | null;
  /** An Ed25519 key signed alongside an RSA key (RFC 8463): that RSA key, whose states it follows. */
  companion_of: string | null;
  matching_checks: number;
  last_observed: string | null;
  last_checked_at: PgTimestamp | null;
  created_at: PgTimestamp;
  activated_at: PgTimestamp | null;
  retiring_at: PgTimestamp | null;
  revoke_after: PgTimestamp | null;
  revoked_at: PgTimestamp | null;
}

const COLUMNS = `id, domain_id, selector, algorithm, public_key, state, rotation_id, companion_of, matching_checks, last_observed,
  last_checked_at, created_at, activated_at, retiring_at, revoke_after, revoked_at`;

const run = runSql;

export function listDkimKeys(em: EntityManager, domainId: string): Promise<DkimKeyRow[]> {
  return run<DkimKeyRow>(
    em,
    `select ${COLUMNS} from dkim_keys where domain_id = ?
      order by case state when 'pending' then 0 when 'active' then 1 when 'retiring' then 2 else 3 end, created_at desc, algorithm desc`,
    [domainId],
  );
}

/**
 * A new pending key of a rotation: its RSA key, or the Ed25519 key signed alongside it (`companionOf`
 * that RSA key, inserted after it). Null when the domain has a rotation in progress (a pending or
 * retiring key of the algorithm: the partial unique index decides) or the selector was taken.
 */
export async function insertPendingKey(
  em: EntityManager,
  k: {
    id: string;
    domainId: string;
    selector: string;
    algorithm?: 'rsa' | 'ed25519';
    companionOf?: string;
    publicKey: string;
    privateKeyEnc: string;
    now: Date;
  },
): Promise<string | null> {
  const rows = await run<{ id: string }>(
    em,
    `insert into dkim_keys (id, domain_id, selector, algorithm, public_key, private_key_enc, state, rotation_id, companion_of, created_at)
     values (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)
     on conflict do nothing returning id`,
    [k.id, k.domainId, k.selector, k.algorithm ?? 'rsa', k.publicKey, k.privateKeyEnc, k.companionOf ?? k.id, k.companionOf ?? null, k.now],
  );
  return rows[0]?.id ?? null;
}

/** The keys signed alongside a key (its Ed25519 companion), whatever their state. */
export function readCompanions(em: EntityManager, keyId: string): Promise<DkimKeyRow[]> {
  return run<DkimKeyRow>(em, `select ${COLUMNS} from dkim_keys where companion_of = ? order by created_at`, [keyId]);
}

/** A rotation's pending companions → revoked with it (cancel, expiry, the domain deleted); their selectors. */
export function revokePendingCompanions(em: EntityManager, keyId: string, now: Date): Promise<{ id: string; selector: string }[]> {
  return run<{ id: string; selector: string }>(
    em,
    `update dkim_keys set state = 'revoked', private_key_enc = null, revoked_at = ?
      where companion_of = ? and state = 'pending' returning id, selector`,
    [now, keyId],
  );
}

/** Pending → revoked (cancel, or the rotation giving up); false when it was no longer pending. */
export async function revokePendingKey(
  em: EntityManager,
  keyId: string,
  now: Date,
): Promise<{ domain_id: string; selector: string } | null> {
  const [row] = await run<{ domain_id: string; selector: string }>(
    em,
    `update dkim_keys set state = 'revoked', private_key_enc = null, revoked_at = ?
      where id = ? and state = 'pending' returning domain_id, selector`,
    [now, keyId],
  );
  return row ?? null;
}

/** The key a rotation checks, with its domain's name and whether the domain was deleted. */
export async function readRotationKey(
  em: EntityManager,
  keyId: string,
): Promise<(DkimKeyRow & { domain_name: string; organization_id: string; domain_deleted: boolean }) | null> {
  const [row] = await run<DkimKeyRow & { domain_name: string; organization_id: string; domain_deleted: boolean }>(
    em,
    `select ${COLUMNS.replace(/(\w+)/g, 'k.$1')}, d.name as domain_name, d.organization_id, d.deleted_at is not null as domain_deleted
       from dkim_keys k join domains d on d.id = k.domain_id where k.id = ?`,
    [keyId],
  );
  return row ?? null;
}

/** One DNS check of a pending key: a miss resets the count of consecutive matches. */
export async function recordKeyCheck(
  em: EntityManager,
  keyId: string,
  matches: boolean,
  observed: string | null,
  now: Date,
): Promise<void> {
  await run(
    em,
    `update dkim_keys set matching_checks = case when ? then matching_checks + 1 else 0 end, last_observed = ?, last_checked_at = ?
      where id = ? and state = 'pending'`,
    [matches, observed, now, keyId],
  );
}

/**
 * The switch, in the caller's transaction: the pending key becomes active only if still pending
 * (a cancel may have won), with its pending companion (the Ed25519 key signed alongside); then
 * the domain's other active keys retire, of either algorithm (an RSA-only rotation ends Ed25519
 * signing), and the domain's row mirrors the new (RSA) key. Returns the retired key ids, or null
 * when the key was no longer pending.
 */
export async function switchToKey(em: EntityManager, keyId: string, now: Date, revokeAfter: Date): Promise<string[] | null> {
  const [key] = await run<{ domain_id: string; selector: string; public_key: string; private_key_enc: string }>(
    em,
    `update dkim_keys set state = 'active', activated_at = ? where id = ? and state = 'pending'
      returning domain_id, selector, public_key, private_key_enc`,
    [now, keyId],
  );
  if (!key) return null;
  await run(em, `update dkim_keys set state = 'active', activated_at = ? where companion_of = ? and state = 'pending'`, [now, keyId]);
  const retired = await run<{ id: string }>(
    em,
    `update dkim_keys set state = 'retiring', retiring_at = ?, revoke_after = ?, retired_by = ?
      where domain_id = ? and state = 'active' and id <> ? and companion_of is distinct from ? returning id`,
    [now, revokeAfter, keyId, key.domain_id, keyId, keyId],
  );
  await run(em, `update domains set dkim_selector = ?, dkim_public_key = ?, dkim_private_key_enc = ? where id = ?`, [
    key.selector,
    key.public_key,
    key.private_key_enc,
    key.domain_id,
  ]);
  return retired.map((r) => r.id);
}

/** Retiring → revoked: the private key is deleted; the selector stays taken. Ids are uuids (the workflow's record of the switch). */
export async function revokeRetiringKeys(
  em: EntityManager,
  domainId: string,
  keyIds: string[],
  now: Date,
): Promise<{ id: string; selector: string }[]> {
  return run<{ id: string; selector: string }>(
    em,
    `update dkim_keys set state = 'revoked', private_key_enc = null, revoked_at = ?
      where domain_id = ? and id = any(?::uuid[]) and state = 'retiring' returning id, selector`,
    [now, domainId, `{${keyIds.join(',')}}`],
  );
}
