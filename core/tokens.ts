import { createHash, randomBytes } from 'node:crypto';
import type { KeyMode } from '../db/entities';

/** What a token looks like; anything else is refused before any lookup. */
export const TOKEN_RE = /^svc_(live|test)_[A-Za-z0-9_-]{20,100}$/;

/** The token of an `Authorization: Bearer <token>` header, or null when there is none. */
export function bearerToken(authorization: string): string | null {
  return /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1] ?? null;
}

/** Tokens are stored and looked up as their SHA-256, never in clear. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** A fresh token, what is stored of it (SHA-256) and what is shown of it later (prefix). */
export function issueToken(mode: KeyMode): { token: string; tokenHash: string; tokenPrefix: string } {
  const token = `svc_${mode}_${randomBytes(24).toString('base64url')}`;
  return { token, tokenHash: hashToken(token), tokenPrefix: token.slice(0, 13) };
}
