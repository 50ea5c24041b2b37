import { createHash, randomBytes } from 'node:crypto';
import type { Orm } from '../../db/orm';
import { isUuid, uuidv7 } from '../../db/ids';
import * as sql from '../../db/sql/operators';
import { parseMailbox } from '../emails/address';
import { OperatorError } from '../limits/operator';
import type { Secrets } from '../secrets';
import { hashPassword, passwordProblem, verifyPassword } from './passwords';
import { newTotpSecret, totpStep, totpUri } from './totp';

/**
 * The console's operators: a platform operator (no organization) runs the whole service; an
 * organization's administrator sees that organization only. Nobody chooses a password on the
 * command line: an operator gets a one-time link (`svc operator create`, or a platform operator's
 * page) and sets it there.
 */

export type OperatorRole = 'platform' | 'org_admin';

export interface Operator {
  id: string;
  email: string;
  organizationId: string | null;
  role: OperatorRole;
  totpEnabled: boolean;
}

/** How long a set-password link works. */
export const LINK_TTL_MS = 24 * 3_600_000;

export function toOperator(row: sql.OperatorRow): Operator {
  return {
    id: row.id,
    email: row.email,
    organizationId: row.organization_id,
    role: row.organization_id === null ? 'platform' : 'org_admin',
    totpEnabled: row.totp_enabled,
  };
}

/** An operator's email: exactly one bare address (no display name, no angle brackets), lower-cased. */
export function operatorEmail(email: string): string | null {
  const m = typeof email === 'string' ? parseMailbox(email) : null;
  return m && m.name === null && m.address === email.trim() ? m.normalized : null;
}

/** A link token (shown once, in the URL) and what is stored of it. */
function newLinkToken(): { token: string; tokenHash: string } {
  const token = randomBytes(32).toString('base64url');
  return { token, tokenHash: linkHash(token) };
}

const linkHash = (token: string) => createHash('sha256').update(token).digest('hex');
const linkUrl = (publicBase: string, token: string) => `${publicBase.replace(/\/+$/, '')}/console/set-password/${token}`;
/** A token as newLinkToken makes them; anything else is not looked up. */
const LINK_TOKEN_RE = /^[A-Za-z0-9_-]{43}$/;

export async function createOperator(
  orm: Orm,
  { email, organizationId }: { email: string; organizationId: string | null },
  publicBase: string,
): Promise<{ id: string; email: string; set_password_url: string }> {
  const normalized = operatorEmail(email);
  if (!normalized) throw new OperatorError(`--email must be one plain address (name@example.com), got ${JSON.stringify(email)}`);
  if (organizationId !== null && !isUuid(organizationId)) throw new OperatorError('the organization must be named by id');
  const { token, tokenHash } = newLinkToken();
  const row = await sql.insertOperatorWithLink(orm, { id: uuidv7(), email: normalized, organizationId, tokenHash, linkMs: LINK_TTL_MS });
  if (!row.organization_found) throw new OperatorError(`no organization ${organizationId}`);
  if (row.id === null) throw new OperatorError(`an operator ${normalized} already exists`);
  return { id: row.id, email: normalized, set_password_url: linkUrl(publicBase, token) };
}

/** A new one-time link for an operator (its earlier unused links stop working): the URL to hand over. */
export async function issuePasswordLink(orm: Orm, operatorId: string, publicBase: string): Promise<string> {
  const { token, tokenHash } = newLinkToken();
  if (!isUuid(operatorId) || !(await sql.issueLink(orm, operatorId, tokenHash, LINK_TTL_MS))) {
    throw new OperatorError(`no operator ${operatorId}`);
  }
  return linkUrl(publicBase, token);
}

/** Who a link is for, while it is unused and unexpired; null otherwise. */
export async function readPasswordLink(orm: Orm, token: string): Promise<{ operatorId: string; email: string } | null> {
  if (typeof token !== 'string' || !LINK_TOKEN_RE.test(token)) return null;
  const row = await sql.readLink(orm, linkHash(token));
  return row && { operatorId: row.operator_id, email: row.email };
}

/**
 * Sets the password through a link: a refused password leaves the link usable; an accepted one
 * spends it, sets the hash and ends the operator's sessions in one statement. Null: the link is
 * not valid (unknown, used, expired, or spent by a concurrent request).
 */
export async function consumePasswordLink(
  orm: Orm,
  token: string,
  newPassword: string,
): Promise<{ operatorId: string } | { problem: string } | null> {
  if (typeof token !== 'string' || !LINK_TOKEN_RE.test(token)) return null;
  const problem = passwordProblem(newPassword);
  if (problem) return { problem };
  const operatorId = await sql.consumeLink(orm, linkHash(token), await hashPassword(newPassword));
  return operatorId === null ? null : { operatorId };
}

/**
 * `npm start` in development: while no operator has a password, a way in. With no operators at
 * all, a platform operator `email` is created; then the oldest operator without a password gets
 * a fresh link (earlier ones stop working), whose URL is answered. Null once anyone has a password.
 */
export async function ensureFirstOperator(orm: Orm, email: string, publicBase: string): Promise<string | null> {
  const normalized = operatorEmail(email);
  if (!normalized) throw new OperatorError(`the first operator's email must be one plain address, got ${JSON.stringify(email)}`);
  await sql.insertFirstOperator(orm, uuidv7(), normalized);
  const id = await sql.firstOperatorWithoutPassword(orm);
  return id === null ? null : issuePasswordLink(orm, id, publicBase);
}

/**
 * Starts TOTP setup: a new secret, stored sealed and pending (TOTP stays off until confirmTotp).
 * Refused while TOTP is on: replacing the secret would turn the second factor off unasked.
 */
export async function beginTotp(orm: Orm, secrets: Secrets, operatorId: string): Promise<{ secret: string; uri: string }> {
  const op = await sql.readOperator(orm, operatorId);
  if (!op) throw new OperatorError(`no operator ${operatorId}`);
  const secret = newTotpSecret();
  if (!(await sql.setPendingTotp(orm, operatorId, secrets.encrypt(secret)))) {
    throw new OperatorError('two-factor authentication is already on: turn it off first');
  }
  return { secret, uri: totpUri(op.email, secret) };
}

/** Turns TOTP on when `code` is right for the pending secret (that code is then spent). False: wrong code, or nothing pending. */
export async function confirmTotp(orm: Orm, secrets: Secrets, operatorId: string, code: string): Promise<boolean> {
  const op = await sql.readOperator(orm, operatorId);
  if (!op || op.totp_enabled || op.totp_secret === null) return false;
  const step = totpStep(secrets.decrypt(op.totp_secret), code);
  if (step === null) return false;
  return sql.enableTotp(orm, operatorId, op.totp_secret, step);
}

export async function disableTotp(orm: Orm, operatorId: string): Promise<void> {
  await sql.disableTotp(orm, operatorId);
}

/**
 * Changes a signed-in operator's password: the current one must be right and the new one
 * acceptable. Every session of the operator is revoked with the change (one statement): the caller
 * opens a new one for this browser.
 */
export async function changePassword(
  orm: Orm,
  operatorId: string,
  current: string,
  next: string,
): Promise<{ ok: true } | { problem: string }> {
  const op = await sql.readOperator(orm, operatorId);
  const stored = op?.password_hash ?? null;
  if (!(await verifyPassword(current, stored)) || stored === null) return { problem: 'The current password is not right.' };
  const problem = passwordProblem(next);
  if (problem) return { problem };
  if (!(await sql.replacePassword(orm, operatorId, stored, await hashPassword(next)))) {
    return { problem: 'The password was changed meanwhile; sign in again.' };
  }
  return { ok: true };
}
