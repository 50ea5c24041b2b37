import { EntitySchema } from '@mikro-orm/core';

/** One management write: which key did what to which target. Written in the same transaction. */
export class AuditEntry {
  id!: string;
  organizationId!: string;
  /** Null when an operator acted through `svc` rather than an API key. */
  apiKeyId: string | null = null;
  /** Who acted when no key did: `console:<email>` for an operator of the web console; else null. */
  actor: string | null = null;
  /** `key.created`, `key.rotated`, `key.revoked`, `organization.updated`, ... */
  action!: string;
  targetType!: string;
  targetId!: string;
  details: Record<string, unknown> = {};
  createdAt: Date = new Date();
}

export const AuditEntrySchema = new EntitySchema<AuditEntry>({
  class: AuditEntry,
  tableName: 'audit_log',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    apiKeyId: { type: 'uuid', nullable: true },
    actor: { type: 'text', nullable: true },
    action: { type: 'text' },
    targetType: { type: 'text' },
    targetId: { type: 'text' },
    details: { type: 'json' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
