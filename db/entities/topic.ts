import { EntitySchema } from '@mikro-orm/core';

export class Topic {
  id!: string;
  organizationId!: string;
  slug!: string;
  name!: string;
  /** True: a contact without a subscription row for this topic counts as subscribed. */
  defaultOptIn!: boolean;
  createdAt: Date = new Date();
}

export const TopicSchema = new EntitySchema<Topic>({
  class: Topic,
  tableName: 'topics',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    slug: { type: 'text' },
    name: { type: 'text' },
    defaultOptIn: { type: 'boolean' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
