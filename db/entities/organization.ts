import { EntitySchema } from '@mikro-orm/core';

export type Plan = 'free' | 'standard';

export class Organization {
  id!: string;
  name!: string;
  plan: Plan = 'free';
  postalAddress: string | null = null;
  createdAt: Date = new Date();
}

export const OrganizationSchema = new EntitySchema<Organization>({
  class: Organization,
  tableName: 'organizations',
  properties: {
    id: { type: 'uuid', primary: true },
    name: { type: 'text' },
    plan: { type: 'text' },
    postalAddress: { type: 'text', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
