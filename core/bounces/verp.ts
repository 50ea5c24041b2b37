import { createHmac, timingSafeEqual } from 'node:crypto';
import { uuidBytes, uuidOf } from '../signed-token';

/**
 * VERP return paths (issue 14): every live message leaves with `bounces+<token>@<MAIL FROM host>`,
 * where the token names one recipient row (which names its message) and carries an HMAC of it, so
 * a bounce maps back to exactly one (message, recipient) and nobody can forge one for another.
 *
 * The token is lower-case base32 (RFC 4648 alphabet, no padding): mail systems may change the
 * case of a local part, and base32 survives that. 16 bytes of id + 10 bytes of HMAC-SHA-256 are 42
 * characters, so `bounces+<token>` stays within the 64 a local part may have.
 */
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const MAC_BYTES = 10;
const PREFIX = 'bounces+';

export function verpToken(secret: Buffer, recipientId: string): string {
  const id = uuidBytes(recipientId);
  return base32(Buffer.concat([id, mac(secret, id)]));
}

/** The recipient id a token names, or null when it is malformed or its HMAC does not match (forged). */
export function readVerpToken(secret: Buffer, token: string): string | null {
  const bytes = unbase32(token.toLowerCase());
  if (bytes === null || bytes.length !== 16 + MAC_BYTES) return null;
  const id = bytes.subarray(0, 16);
  if (!timingSafeEqual(bytes.subarray(16), mac(secret, id))) return null;
  return uuidOf(id);
}

/** Return paths of live mail and their reading back, under one key (derived from SECRETS_KEY). */
export interface ReturnPaths {
  /** `bounces+<token>@<host>`: the envelope sender of one recipient's SMTP transaction. */
  address(recipientId: string, host: string): string;
  /** The recipient a token names, or null when the token is malformed or forged. */
  recipientOf(token: string): string | null;
}

export function createReturnPaths(key: Buffer): ReturnPaths {
  return {
    address: (recipientId, host) => verpAddress(verpToken(key, recipientId), host),
    recipientOf: (token) => readVerpToken(key, token),
  };
}

export const verpAddress = (token: string, mailFromHost: string) => `${PREFIX}${token}@${mailFromHost}`;

/** The token of a `bounces+<token>@host` address (any case), or null for any other address. */
export function verpTokenOf(address: string): string | null {
  const at = address.lastIndexOf('@');
  const local = (at < 0 ? address : address.slice(0, at)).toLowerCase();
  return local.startsWith(PREFIX) && local.length > PREFIX.length ? local.slice(PREFIX.length) : null;
}

const mac = (secret: Buffer, id: Buffer) => createHmac('sha256', secret).update('verp:').update(id).digest().subarray(0, MAC_BYTES);

function base32(bytes: Buffer): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += ALPHABET[(value << (5 - bits)) & 31];
  return out;
}

function unbase32(s: string): Buffer | null {
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const c of s) {
    const i = ALPHABET.indexOf(c);
    if (i < 0) return null;
    value = ((value << 5) | i) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}
