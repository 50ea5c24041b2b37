import type { EntityManager } from '@mikro-orm/postgresql';
import { runSql } from './run';

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
  matching_checks: number;
  last_observed: string | null;
  last_checked_at: Date | null;
  created_at: Date;
  activated_at: Date | null;
  retiring_at: Date | null;
  revoke_after: Date | null;
  revoked_at: Date | null;
}

const COLUMNS = `id, domain_id, selector, algorithm, public_key, state, rotation_id, matching_checks, last_observed,
  last_checked_at, created_at, activated_at, retiring_at, revoke_after, revoked_at`;

const run = runSql;

export function listDkimKeys(em: EntityManager, domainId: string): Promise<DkimKeyRow[]> {
  return run<DkimKeyRow>(
    em,
    `select ${COLUMNS} from dkim_keys where domain_id = ?
      order by case state when 'pending' then 0 when 'active' then 1 when 'retiring' then 2 else 3 end, created_at desc`,
    [domainId],
  );
}

/**
 * The new pending key of a rotation; null when the domain has a rotation in progress (a pending or
 * retiring key: the partial unique index decides) or the selector was taken.
 */
export async function insertPendingKey(
  em: EntityManager,
  k: { id: string; domainId: string; selector: string; publicKey: string; privateKeyEnc: string; now: Date },
): Promise<string | null> {
  const rows = await run<{ id: string }>(
    em,
    `insert into dkim_keys (id, domain_id, selector, algorithm, public_key, private_key_enc, state, rotation_id, created_at)
     values (?, ?, ?, 'rsa', ?, ?, 'pending', ?, ?)
     on conflict do nothing returning id`,
    [k.id, k.domainId, k.selector, k.publicKey, k.privateKeyEnc, k.id, k.now],
  );
  return rows[0]?.id ?? null;
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
 * (a cancel may have won), then the domain's other active keys retire, and the domain's row
 * mirrors the new key. Returns the retired key ids, or null when the key was no longer pending.
 */
export async function switchToKey(em: EntityManager, keyId: string, now: Date, revokeAfter: Date): Promise<string[] | null> {
  const [key] = await run<{ domain_id: string; selector: string; public_key: string; private_key_enc: string }>(
    em,
    `update dkim_keys set state = 'active', activated_at = ? where id = ? and state = 'pending'
      returning domain_id, selector, public_key, private_key_enc`,
    [now, keyId],
  );
  if (!key) return null;
  const retired = await run<{ id: string }>(
    em,
    `update dkim_keys set state = 'retiring', retiring_at = ?, revoke_after = ?, retired_by = ?
      where domain_id = ? and state = 'active' and id <> ? returning id`,
    [now, revokeAfter, keyId, key.domain_id, keyId],
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
