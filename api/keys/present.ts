import type { ApiKey, ApiKeyToken } from '../../db/entities';
import { DEFAULT_RATE_LIMIT } from '../../db/sql/rate-window';

/**
 * A key as the API shows it: never a token, never a hash. `tokens` are the key's usable ones,
 * newest first: its current token and those rotated out whose 24 hours are still running.
 */
export function presentKey(k: ApiKey, tokens: ApiKeyToken[], lastUsed: Date | null = null) {
  const current = tokens.find((t) => t.expiresAt === null);
  const previous = k.revokedAt ? [] : tokens.filter((t) => t.expiresAt !== null);
  // A rotation makes the current token younger than the key.
  const rotatedAt = current && current.createdAt.getTime() > k.createdAt.getTime() ? current.createdAt : null;
  return {
    object: 'key',
    id: k.id,
    name: k.name,
    permission: k.permission,
    mode: k.mode,
    token_prefix: current?.tokenPrefix ?? null,
    domain_ids: k.domainIds,
    rate_limit: k.rateLimit ?? DEFAULT_RATE_LIMIT,
    created_at: k.createdAt.toISOString(),
    rotated_at: rotatedAt?.toISOString() ?? null,
    /** When the last token rotated out stops working (null: none is still in its grace). */
    previous_token_expires_at: previous.length ? new Date(Math.max(...previous.map((t) => t.expiresAt!.getTime()))).toISOString() : null,
    /** Every token rotated out that still works, each until its own expiry. */
    previous_tokens: previous.map((t) => ({ token_prefix: t.tokenPrefix, expires_at: t.expiresAt!.toISOString() })),
    revoked_at: k.revokedAt?.toISOString() ?? null,
    /** The second of the key's last request (any token of it), null if never used. */
    last_used_at: lastUsed?.toISOString() ?? null,
  };
}
