import { unsealToken, sealToken, uuidBytes, uuidOf } from '../signed-token';

/**
 * Open and click tokens name a message (tracked mail has one recipient) and, for a click, the
 * URL it redirects to: the URL is signed, so a tracking host never redirects anywhere a message
 * of ours did not link to (no open redirect).
 */
const OPEN = 0x6f; // 'o'
const CLICK = 0x63; // 'c'

export const pixelToken = (key: Buffer, emailId: string) => sealToken(key, Buffer.concat([Buffer.from([OPEN]), uuidBytes(emailId)]));

export const clickToken = (key: Buffer, emailId: string, url: string) =>
  sealToken(key, Buffer.concat([Buffer.from([CLICK]), uuidBytes(emailId), Buffer.from(url, 'utf8')]));

export function readPixelToken(key: Buffer, token: string): { emailId: string } | null {
  const p = unsealToken(key, token);
  return p && p.length === 17 && p[0] === OPEN ? { emailId: uuidOf(p.subarray(1)) } : null;
}

export function readClickToken(key: Buffer, token: string): { emailId: string; url: string } | null {
  const p = unsealToken(key, token);
  if (!p || p.length <= 17 || p[0] !== CLICK) return null;
  const url = p.subarray(17).toString('utf8');
  // Only what the rewrite signs: absolute http(s) URLs.
  return /^https?:\/\//i.test(url) ? { emailId: uuidOf(p.subarray(1, 17)), url } : null;
}
