import { randomBytes } from 'node:crypto';
import type { Orm } from '../../db/orm';
import * as sql from '../../db/sql/operator-sessions';
import { hashToken } from '../tokens';
import { toOperator, type Operator } from './operators';

/**
 * Console sessions: the browser holds a random token (its cookie), the database its SHA-256, so a
 * leak of the table opens no session. A session ends when revoked, after `idleMs` unused, or
 * `absoluteMs` after it was opened, whichever comes first, all decided by the database's clock.
 */

export interface ConsoleSession {
  operator: Operator;
  /** The token forms of this session carry (compare it with timingSafeEqual). */
  csrf: string;
  idHash: string;
}

export interface SessionPolicy {
  idleMs: number;
  absoluteMs: number;
}

/** A token as openSession makes them; anything else is not looked up. */
const TOKEN_RE = /^[A-Za-z0-9_-]{43}$/;

export async function openSession(orm: Orm, operatorId: string, policy: SessionPolicy): Promise<{ token: string; csrf: string }> {
  const token = randomBytes(32).toString('base64url');
  const csrf = randomBytes(32).toString('base64url');
  await sql.insertSession(orm, { idHash: hashToken(token), operatorId, csrf, absoluteMs: policy.absoluteMs });
  return { token, csrf };
}

/** The live session of a cookie's token, its idle clock restarted; null when there is none. */
export async function resolveSession(orm: Orm, token: string | undefined, policy: SessionPolicy): Promise<ConsoleSession | null> {
  if (typeof token !== 'string' || !TOKEN_RE.test(token)) return null;
  const idHash = hashToken(token);
  const row = await sql.touchSession(orm, idHash, policy.idleMs);
  return row && { operator: toOperator(row), csrf: row.csrf_token, idHash };
}

/** Signs a session out (a token that names none: nothing to do). */
export async function revokeSession(orm: Orm, token: string): Promise<void> {
  if (typeof token !== 'string' || !TOKEN_RE.test(token)) return;
  await sql.revokeSession(orm, hashToken(token));
}

/** Signs an operator out everywhere. */
export async function revokeAllSessions(orm: Orm, operatorId: string): Promise<void> {
  await sql.revokeOperatorSessions(orm, operatorId);
}
