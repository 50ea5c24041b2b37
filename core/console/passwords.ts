import { scrypt, timingSafeEqual, randomBytes, type ScryptOptions } from 'node:crypto';

/**
 * Operator passwords, hashed with scrypt (memory-hard: each guess costs 32 MiB, which is what
 * makes guessing on GPUs expensive). Stored as `scrypt$N$r$p$salt$hash` (base64), so the cost can
 * be raised later and old hashes still verify with the parameters they were made with.
 */

const N = 2 ** 15;
const R = 8;
const P = 1;
const SALT_BYTES = 16;
const KEY_BYTES = 32;
/** scrypt needs 128 * N * r bytes (32 MiB here); Node's default ceiling is exactly 32 MiB, too tight. */
const MAXMEM = 64 * 1024 * 1024;

export const PASSWORD_MIN = 12;
export const PASSWORD_MAX = 256;

function derive(plain: string, salt: Buffer, keyLen: number, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => scrypt(plain, salt, keyLen, opts, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(plain: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(plain, salt, KEY_BYTES, { N, r: R, p: P, maxmem: MAXMEM });
  return ['scrypt', N, R, P, salt.toString('base64'), key.toString('base64')].join('$');
}

interface Stored {
  N: number;
  r: number;
  p: number;
  salt: Buffer;
  key: Buffer;
}

/** A stored hash's parts, or null when it is not one this module wrote (bounded, so a row cannot ask for gigabytes). */
function parse(stored: string): Stored | null {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return null;
  const [n, r, p] = parts.slice(1, 4).map(Number);
  const salt = Buffer.from(parts[4], 'base64');
  const key = Buffer.from(parts[5], 'base64');
  const powerOfTwo = Number.isInteger(n) && n > 1 && (n & (n - 1)) === 0;
  if (!powerOfTwo || n > 2 ** 20 || !Number.isInteger(r) || r < 1 || r > 32 || !Number.isInteger(p) || p < 1 || p > 16) return null;
  if (salt.length < 8 || key.length < 16 || 128 * n * r > 256 * 1024 * 1024) return null;
  return { N: n, r, p, salt, key };
}

/** A hash of no password, checked when there is no stored one, so an unknown account costs the same time. */
const DUMMY: Stored = { N, r: R, p: P, salt: Buffer.alloc(SALT_BYTES, 1), key: Buffer.alloc(KEY_BYTES) };

export async function verifyPassword(plain: string, stored: string | null): Promise<boolean> {
  const parsed = stored === null ? null : parse(stored);
  const s = parsed ?? DUMMY;
  const key = await derive(plain, s.salt, s.key.length, { N: s.N, r: s.r, p: s.p, maxmem: Math.max(MAXMEM, 256 * s.N * s.r) });
  return timingSafeEqual(key, s.key) && parsed !== null;
}

/** Why a new password is refused (a sentence for the form), or null when it is acceptable. */
export function passwordProblem(plain: string): string | null {
  if (typeof plain !== 'string') return 'Enter a password.';
  const length = [...plain].length;
  if (length < PASSWORD_MIN) return `Use at least ${PASSWORD_MIN} characters.`;
  if (length > PASSWORD_MAX) return `Use at most ${PASSWORD_MAX} characters.`;
  if (plain.includes('\u0000')) return 'The password cannot contain a NUL character.';
  return null;
}
