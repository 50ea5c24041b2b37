import type { JsonSchema, Operation } from '../openapi/operation';
import { listOf, ref } from '../openapi/common';
import { SUPPRESSION_REASONS, createSuppressionSchema, deleteSuppressionQuerySchema, suppressionsQuerySchema } from './schema';

/** OpenAPI operations of /suppressions (api/suppressions/routes.ts); responses as api/suppressions/present.ts answers them. */

const suppressionFields: Record<string, JsonSchema> = {
  object: { const: 'suppression' },
  id: { type: 'string', format: 'uuid' },
  email: { type: 'string', format: 'email', description: 'Lower-cased.' },
  reason: { type: 'string', enum: [...SUPPRESSION_REASONS] },
  email_id: {
    type: ['string', 'null'],
    format: 'uuid',
    description: 'The message whose bounce or complaint listed the address; null for `manual`.',
  },
  created_at: { type: 'string', format: 'date-time' },
};

const suppressionWith = (extra: Record<string, JsonSchema>): JsonSchema => ({
  type: 'object',
  properties: { ...suppressionFields, ...extra },
  required: [...Object.keys(suppressionFields), ...Object.keys(extra)],
  additionalProperties: false,
});

export const schemas: Record<string, JsonSchema> = {
  Suppression: suppressionWith({}),
  DeletedSuppression: suppressionWith({ deleted: { const: true } }),
};

const example = {
  object: 'suppression',
  id: '0192f0c4-8a1e-7c3b-9a51-3f1d2b7c9e12',
  email: 'gone@example.com',
  reason: 'manual',
  email_id: null,
  created_at: '2025-01-01T00:00:00.000Z',
};

export const operations: Operation[] = [
  {
    method: 'get',
    path: '/suppressions',
    operationId: 'listSuppressions',
    summary: 'List suppressed addresses',
    description: 'Newest first; `email` matches one address exactly (any case).',
    tag: 'Suppressions',
    permission: 'admin',
    query: suppressionsQuerySchema,
    responses: { 200: { description: 'A page of entries.', schema: listOf('Suppression') } },
    errors: ['invalid_cursor'],
  },
  {
    method: 'post',
    path: '/suppressions',
    operationId: 'createSuppression',
    summary: 'Suppress an address',
    description: 'Adds the address with reason `manual`; an address already listed keeps its entry (and its reason).',
    tag: 'Suppressions',
    permission: 'admin',
    body: createSuppressionSchema,
    requestExample: { email: 'gone@example.com' },
    responses: {
      200: { description: 'Already listed: the entry, unchanged.', schema: ref('Suppression') },
      201: { description: 'Added.', schema: ref('Suppression'), example },
    },
    errors: [],
    links: {
      200: { DeleteSuppression: { operationId: 'deleteSuppression', parameters: { email: '$response.body#/email' } } },
      201: { DeleteSuppression: { operationId: 'deleteSuppression', parameters: { email: '$response.body#/email' } } },
    },
  },
  {
    method: 'delete',
    path: '/suppressions/{email}',
    operationId: 'deleteSuppression',
    summary: 'Remove an address from the list',
    description: "`note` (one line, 1–500 characters) is kept in the audit row. The contact's status does not change.",
    tag: 'Suppressions',
    permission: 'admin',
    params: { email: { description: 'The address (URL-encoded, any case).', schema: { type: 'string' } } },
    query: deleteSuppressionQuerySchema,
    responses: { 200: { description: 'The entry as it was.', schema: ref('DeletedSuppression'), example: { ...example, deleted: true } } },
    errors: ['not_found'],
  },
];
