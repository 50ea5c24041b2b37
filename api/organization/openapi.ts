import type { JsonSchema, Operation } from '../openapi/operation';
import { ref } from '../openapi/common';
import { updateOrganizationSchema } from './schema';

/** OpenAPI operations of /organization (api/organization/routes.ts, its `present`). */

const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
const count: JsonSchema = { type: 'integer', minimum: 0 };
const nullableCount: JsonSchema = { type: ['integer', 'null'], minimum: 0 };

/** One daily allowance: its limit (null: no cap) and the recipients reserved against it today. */
const allowance: JsonSchema = {
  type: 'object',
  properties: { limit: nullableCount, sent: count },
  required: ['limit', 'sent'],
  additionalProperties: false,
};

export const schemas: Record<string, JsonSchema> = {
  DailyUsage: {
    type: 'object',
    description: 'Today’s (UTC) use of each of the three daily allowances, in recipients reserved.',
    properties: {
      day: { type: 'string', format: 'date' },
      platform: allowance,
      organization: allowance,
      domains: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            id: { type: 'string', format: 'uuid' },
            name: { type: 'string' },
            warmup_stage: { type: ['integer', 'null'], minimum: 1 },
            limit: nullableCount,
            sent: count,
          },
          required: ['id', 'name', 'warmup_stage', 'limit', 'sent'],
          additionalProperties: false,
        },
      },
    },
    required: ['day', 'platform', 'organization', 'domains'],
    additionalProperties: false,
  },
  Organization: {
    type: 'object',
    properties: {
      object: { const: 'organization' },
      id: { type: 'string', format: 'uuid' },
      name: { type: 'string' },
      plan: { type: 'string', enum: ['free', 'standard'] },
      postal_address: { type: ['string', 'null'], description: 'The legal footer’s address of bulk mail; null: no footer.' },
      daily_send_cap: { ...nullableCount, description: 'The stored setting.' },
      effective_daily_send_cap: { ...nullableCount, description: 'The cap that applies; null: no organization cap.' },
      plan_daily_send_ceiling: { ...nullableCount, description: 'The plan’s ceiling; null on a service plan.' },
      daily_usage: ref('DailyUsage'),
      created_at: dateTime,
      updated_at: dateTime,
    },
    required: [
      'object',
      'id',
      'name',
      'plan',
      'postal_address',
      'daily_send_cap',
      'effective_daily_send_cap',
      'plan_daily_send_ceiling',
      'daily_usage',
      'created_at',
      'updated_at',
    ],
    additionalProperties: false,
  },
};

const example = {
  object: 'organization',
  id: '0192f0c4-8a1e-7c3b-9a51-3f1d2b7c9e10',
  name: 'Acme',
  plan: 'free',
  postal_address: '1 Main St, Springfield',
  daily_send_cap: null,
  effective_daily_send_cap: 100,
  plan_daily_send_ceiling: 100,
  daily_usage: {
    day: '2025-01-01',
    platform: { limit: 45000, sent: 12 },
    organization: { limit: 100, sent: 12 },
    domains: [{ id: '0192f0c4-9b2f-7d4c-8b62-4a2e3c8d0f21', name: 'mail.example.com', warmup_stage: 1, limit: 200, sent: 12 }],
  },
  created_at: '2025-01-01T00:00:00.000Z',
  updated_at: '2025-01-01T00:00:00.000Z',
};

export const operations: Operation[] = [
  {
    method: 'get',
    path: '/organization',
    operationId: 'getOrganization',
    tag: 'Organization',
    summary: 'Retrieve the organization',
    description: 'Its settings and today’s use of the daily send caps.',
    permission: 'admin',
    responses: { 200: { description: 'The organization.', schema: ref('Organization'), example } },
    errors: [],
  },
  {
    method: 'patch',
    path: '/organization',
    operationId: 'updateOrganization',
    tag: 'Organization',
    summary: 'Update the organization',
    description:
      'Any of `name`, `postal_address` (null clears it: bulk mail then has no footer) and `daily_send_cap` (null or 0: the plan’s ceiling on a plan with one, which a value can only lower; ' +
      'on a service plan null is 20,000 and 0 no cap).',
    permission: 'admin',
    body: updateOrganizationSchema,
    requestExample: { postal_address: '1 Main St, Springfield' },
    responses: { 200: { description: 'The organization, as GET answers it.', schema: ref('Organization'), example } },
    errors: [],
  },
];
