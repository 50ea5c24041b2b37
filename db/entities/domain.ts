import { EntitySchema } from '@mikro-orm/core';

export type Stream = 'transactional' | 'bulk';
export type DomainStatus = 'pending' | 'verified';

export class Domain {
  id!: string;
  organizationId!: string;
  name!: string;
  stream: Stream = 'transactional';
  status: DomainStatus = 'pending';
  createdAt: Date = new Date();
}

export const DomainSchema = new EntitySchema<Domain>({
  class: Domain,
  tableName: 'domains',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    name: { type: 'text' },
    stream: { type: 'text' },
    status: { type: 'text' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
