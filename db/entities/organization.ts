import { EntitySchema } from '@mikro-orm/core';

export type Plan = 'free' | 'standard';

export class Organization {
  id!: string;
  name!: string;
  plan: Plan = 'free';
  postalAddress: string | null = null;
  /** Null or 0: the plan's ceiling; a value can only lower it. */
  dailySendCap: number | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
}

/** Daily send ceilings per plan (UTC day, each recipient counts one). */
export const PLAN_DAILY_CEILING: Record<Plan, number> = { free: 100, standard: 20_000 };

export function effectiveDailySendCap(org: Pick<Organization, 'plan' | 'dailySendCap'>): number {
  const ceiling = PLAN_DAILY_CEILING[org.plan];
  return org.dailySendCap ? Math.min(org.dailySendCap, ceiling) : ceiling;
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
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
