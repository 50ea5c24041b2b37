import { Secret, TOTP } from 'otpauth';

// Time-based one-time codes (RFC 6238) for the console's second factor: 6 digits, SHA-1, 30 s,
// what every authenticator app reads from the otpauth:// URI.

const PERIOD = 30;

function totp(secretBase32: string, label = 'operator'): TOTP {
  return new TOTP({ issuer: 'svc', label, algorithm: 'SHA1', digits: 6, period: PERIOD, secret: Secret.fromBase32(secretBase32) });
}

/** A new secret: 20 random bytes (the RFC's SHA-1 key size), base32. */
export function newTotpSecret(): string {
  return new Secret({ size: 20 }).base32;
}

/** The otpauth:// URI an authenticator app scans (as a QR code) or takes pasted. */
export function totpUri(email: string, secretBase32: string): string {
  return totp(secretBase32, email).toString();
}

/**
 * The time step a code is good for (the current one or one either side, for clock drift), or null.
 * The step lets the caller accept each code once (db/sql/operators.ts, acceptTotpStep).
 */
export function totpStep(secretBase32: string, code: string, now = Date.now()): number | null {
  if (typeof code !== 'string') return null;
  const token = code.replace(/\s/g, '');
  if (!/^\d{6}$/.test(token)) return null;
  const delta = totp(secretBase32).validate({ token, timestamp: now, window: 1 });
  return delta === null ? null : Math.floor(now / 1000 / PERIOD) + delta;
}

export function verifyTotp(secretBase32: string, code: string, now = Date.now()): boolean {
  return totpStep(secretBase32, code, now) !== null;
}

/** The code of the moment (tests, and nothing else: the service never shows one). */
export function totpCode(secretBase32: string, now = Date.now()): string {
  return totp(secretBase32).generate({ timestamp: now });
}
