import { EntitySchema } from '@mikro-orm/core';

export type SuppressionReason = 'bounce' | 'complaint' | 'manual';

export class Suppression {
  id!: string;
  organizationId!: string;
  /** Lower-cased address. */
  email!: string;
  reason!: SuppressionReason;
  sourceEmailId: string | null = null;
  createdAt: Date = new Date();
}

export const SuppressionSchema = new EntitySchema<Suppression>({
  class: Suppression,
  tableName: 'suppressions',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    email: { type: 'text' },
    reason: { type: 'text' },
    sourceEmailId: { type: 'uuid', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
