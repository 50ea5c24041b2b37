import { EntitySchema } from '@mikro-orm/core';

export type Plan = 'free' | 'standard';
/** How live mail leaves: through SMTP_URL's relay, or straight to each recipient domain's MX. */
export type Transport = 'relay' | 'direct';

export class Organization {
  id!: string;
  name!: string;
  plan: Plan = 'free';
  postalAddress: string | null = null;
  /** Free plan: null or 0 means its ceiling, a value can only lower it; service plans: null means 20,000, 0 none (core/limits/caps.ts). */
  dailySendCap: number | null = null;
  transport: Transport = 'relay';
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
}

export const OrganizationSchema = new EntitySchema<Organization>({
  class: Organization,
  tableName: 'organizations',
  properties: {
    id: { type: 'uuid', primary: true },
    name: { type: 'text' },
    plan: { type: 'text' },
    postalAddress: { type: 'text', nullable: true },
    dailySendCap: { type: 'integer', nullable: true },
    transport: { type: 'text' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
