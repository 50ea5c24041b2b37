import type { Orm } from '../../db/orm';
import { readOperatorByEmail, acceptTotpStep } from '../../db/sql/operators';
import { chargeAttempt, clearAccount, refundAttempt } from '../../db/sql/signin-failures';
import type { Secrets } from '../secrets';
import { toOperator, type Operator } from './operators';
import { verifyPassword } from './passwords';
import { openSession, type SessionPolicy } from './sessions';
import { totpStep } from './totp';

/**
 * Console sign-in: email, password and (when the operator turned it on) a TOTP code.
 *
 * Guessing is limited per account and per client address, per 15-minute window, in PostgreSQL
 * (db/sql/signin-failures.ts): an account with 5 failures in the window is `locked`, whether it
 * exists or not (the answer must not tell which emails are operators), and so is every account
 * tried from an address with 30. The attempt is charged before the password is checked and given
 * back when it was no failure, so concurrent guesses cannot slip past the count. An unknown email
 * costs one scrypt all the same (core/console/passwords.ts), so timing does not tell either.
 */

export const ACCOUNT_FAILURE_LIMIT = 5;
export const ADDRESS_FAILURE_LIMIT = 30;
export const FAILURE_WINDOW_MS = 15 * 60_000;

export type SignInResult =
  { ok: true; token: string; csrf: string; operator: Operator } | { ok: false; reason: 'invalid' | 'locked' | 'code_required' };

/** Longest email kept in a failure key: longer input is no address, and must not bloat the table. */
const MAX_KEY_EMAIL = 320;

export async function signIn(
  deps: { orm: Orm; secrets: Secrets; policy: SessionPolicy },
  input: { email: string; password: string; code?: string; address: string },
): Promise<SignInResult> {
  const { orm } = deps;
  const email = String(input.email ?? '')
    .trim()
    .toLowerCase()
    .slice(0, MAX_KEY_EMAIL);
  const accountKey = `account:${email}`;
  const addressKey = `address:${input.address}`;
  const charge = await chargeAttempt(orm, accountKey, addressKey, FAILURE_WINDOW_MS);
  if (charge.account > ACCOUNT_FAILURE_LIMIT || charge.address > ADDRESS_FAILURE_LIMIT) {
    // Not checked, so not a failure: the counts stay at the limit.
    await refundAttempt(orm, [accountKey, addressKey], charge.windowStart);
    return { ok: false, reason: 'locked' };
  }

  const op = await readOperatorByEmail(orm, email);
  // No operator, or one without a password yet: the dummy hash is checked, and fails.
  const passwordOk = await verifyPassword(String(input.password ?? ''), op?.password_hash ?? null);
  if (!op || !passwordOk) return { ok: false, reason: 'invalid' };

  if (op.totp_enabled && op.totp_secret !== null) {
    const code = input.code === undefined ? '' : String(input.code).trim();
    if (code === '') {
      // The right password, asked for the second factor: not a failure.
      await refundAttempt(orm, [accountKey, addressKey], charge.windowStart);
      return { ok: false, reason: 'code_required' };
    }
    const step = totpStep(deps.secrets.decrypt(op.totp_secret), code);
    // A code is good once: a replayed one fails like a wrong one.
    if (step === null || !(await acceptTotpStep(orm, op.id, step))) return { ok: false, reason: 'invalid' };
  }

  await clearAccount(orm, accountKey, addressKey, charge.windowStart);
  const { token, csrf } = await openSession(orm, op.id, deps.policy);
  return { ok: true, token, csrf, operator: toOperator(op) };
}
