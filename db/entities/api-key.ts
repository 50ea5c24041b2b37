import { EntitySchema } from '@mikro-orm/core';

export type Permission = 'send' | 'full' | 'admin';
export type KeyMode = 'live' | 'test';

/** A key's identity and rights; its tokens are ApiKeyToken rows (one current, others in their grace). */
export class ApiKey {
  id!: string;
  organizationId!: string;
  name!: string;
  permission!: Permission;
  mode!: KeyMode;
  /** Null: every domain of the organization. */
  domainIds: string[] | null = null;
  rateLimit: number | null = null;
  createdAt: Date = new Date();
  revokedAt: Date | null = null;
}

export const ApiKeySchema = new EntitySchema<ApiKey>({
  class: ApiKey,
  tableName: 'api_keys',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    name: { type: 'text' },
    permission: { type: 'text' },
    mode: { type: 'text' },
    domainIds: { type: 'json', nullable: true },
    rateLimit: { type: 'integer', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    revokedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
  },
});

/**
 * A token of a key, stored as its SHA-256 only. The current token has no expiry; each rotation
 * gives the token it supersedes 24 hours of its own, so tokens rotated out twice in a day all keep
 * their grace.
 */
export class ApiKeyToken {
  tokenHash!: string;
  apiKeyId!: string;
  /** First characters of the token, for recognising it. */
  tokenPrefix!: string;
  createdAt: Date = new Date();
  expiresAt: Date | null = null;
}

export const ApiKeyTokenSchema = new EntitySchema<ApiKeyToken>({
  class: ApiKeyToken,
  tableName: 'api_key_tokens',
  properties: {
    tokenHash: { type: 'text', primary: true },
    apiKeyId: { type: 'uuid' },
    tokenPrefix: { type: 'text' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    expiresAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
  },
});
