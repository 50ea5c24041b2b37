import { EntitySchema } from '@mikro-orm/core';

export type Permission = 'send' | 'full' | 'admin';
export type KeyMode = 'live' | 'test';

export class ApiKey {
  id!: string;
  organizationId!: string;
  name!: string;
  permission!: Permission;
  mode!: KeyMode;
  /** SHA-256 of the token, hex; the token itself is never stored. */
  tokenHash!: string;
  /** First characters of the token, for display. */
  tokenPrefix!: string;
  /** Null: every domain of the organization. */
  domainIds: string[] | null = null;
  rateLimit: number | null = null;
  createdAt: Date = new Date();
  revokedAt: Date | null = null;
  /** The token replaced by the last rotation, still accepted until previousTokenExpiresAt. */
  previousTokenHash: string | null = null;
  previousTokenExpiresAt: Date | null = null;
  rotatedAt: Date | null = null;
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
    tokenHash: { type: 'text' },
    tokenPrefix: { type: 'text' },
    domainIds: { type: 'json', nullable: true },
    rateLimit: { type: 'integer', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    revokedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    previousTokenHash: { type: 'text', nullable: true },
    previousTokenExpiresAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    rotatedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
  },
});
