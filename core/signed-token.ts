import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Tokens in public links (unsubscribe, open pixel, click redirect): the payload in clear and an
 * HMAC-SHA-256 of it, base64url, so a link names what it acts on and nobody can make one for
 * another message, recipient or URL. The payload is not secret: it only names the recipient's own
 * message. 16 bytes of MAC (128 bits) are far beyond guessing.
 */
const MAC_BYTES = 16;
/** Longer tokens are refused before any work: a click token carries its URL, and URLs stay far below this. */
export const MAX_TOKEN_CHARS = 8192;

export function sealToken(key: Buffer, payload: Buffer): string {
  return Buffer.concat([payload, mac(key, payload)]).toString('base64url');
}

/** The payload of a token made with `key`, or null when it is malformed or was altered. */
export function unsealToken(key: Buffer, token: string): Buffer | null {
  if (token.length > MAX_TOKEN_CHARS || !/^[A-Za-z0-9_-]+$/.test(token)) return null;
  const bytes = Buffer.from(token, 'base64url');
  if (bytes.length <= MAC_BYTES) return null;
  const payload = bytes.subarray(0, bytes.length - MAC_BYTES);
  return timingSafeEqual(bytes.subarray(bytes.length - MAC_BYTES), mac(key, payload)) ? payload : null;
}

const mac = (key: Buffer, payload: Buffer) => createHmac('sha256', key).update(payload).digest().subarray(0, MAC_BYTES);

/** A UUID as its 16 bytes, and back: ids in tokens take 16 bytes instead of 36 characters. */
export function uuidBytes(id: string): Buffer {
  const b = Buffer.from(id.replace(/-/g, ''), 'hex');
  if (b.length !== 16) throw new Error('not a UUID');
  return b;
}

export function uuidOf(b: Buffer): string {
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}
