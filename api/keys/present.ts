import { ApiKey } from '../../db/entities';
import { DEFAULT_RATE_LIMIT } from '../middleware/auth';

/** A key as the API shows it: never the token, never its hash. */
export function presentKey(k: ApiKey) {
  return {
    object: 'key',
    id: k.id,
    name: k.name,
    permission: k.permission,
    mode: k.mode,
    token_prefix: k.tokenPrefix,
    domain_ids: k.domainIds,
    rate_limit: k.rateLimit ?? DEFAULT_RATE_LIMIT,
    created_at: k.createdAt.toISOString(),
    rotated_at: k.rotatedAt?.toISOString() ?? null,
    previous_token_expires_at: k.previousTokenExpiresAt && !k.revokedAt ? k.previousTokenExpiresAt.toISOString() : null,
    revoked_at: k.revokedAt?.toISOString() ?? null,
  };
}
