import type { JsonSchema, Operation } from '../openapi/operation';
import { listOf } from '../openapi/common';
import { auditQuerySchema } from './schema';

/** OpenAPI operation of /audit-log (api/audit-log/routes.ts). */

export const schemas: Record<string, JsonSchema> = {
  AuditEntry: {
    type: 'object',
    properties: {
      object: { const: 'audit_entry' },
      id: { type: 'string', format: 'uuid' },
      action: { type: 'string', description: 'What was done: `key.created`, `domain.updated`, `organization.updated`, ...' },
      key_id: { type: ['string', 'null'], format: 'uuid', description: 'The key that did it; null for the console and `svc`.' },
      actor: {
        type: 'string',
        pattern: '^(key:.+|console:.+|operator)$',
        description: 'Who did it, in the `actor` filter’s terms: `key:<key id>`, `console:<operator email>` or `operator` (`svc`).',
      },
      target: {
        type: 'object',
        properties: { type: { type: 'string' }, id: { type: 'string' } },
        required: ['type', 'id'],
        additionalProperties: false,
      },
      details: {
        type: 'object',
        additionalProperties: true,
        description: 'What changed (never secrets); its fields depend on the action.',
      },
      created_at: { type: 'string', format: 'date-time' },
    },
    required: ['object', 'id', 'action', 'key_id', 'actor', 'target', 'details', 'created_at'],
    additionalProperties: false,
  },
};

export const operations: Operation[] = [
  {
    method: 'get',
    path: '/audit-log',
    operationId: 'listAuditLog',
    tag: 'Audit log',
    summary: 'List the audit log',
    description:
      'Every management write, newest first, keyset-paginated. `actor` (`key:<key id>`, `console:<operator email>` or `operator`) and `action` (exact) filter it.',
    permission: 'admin',
    query: auditQuerySchema,
    responses: {
      200: {
        description: 'A page of entries.',
        schema: listOf('AuditEntry'),
        example: {
          object: 'list',
          data: [
            {
              object: 'audit_entry',
              id: '0192f0c4-8a1e-7c3b-9a51-3f1d2b7c9e10',
              action: 'key.created',
              key_id: '0192f0c4-9b2f-7d4c-8b62-4a2e3c8d0f21',
              actor: 'key:0192f0c4-9b2f-7d4c-8b62-4a2e3c8d0f21',
              target: { type: 'key', id: '0192f0c4-ac30-7e5d-9c73-5b3f4d9e1a32' },
              details: { name: 'billing service', permission: 'send', mode: 'live', domain_ids: null, rate_limit: null },
              created_at: '2025-01-01T00:00:00.000Z',
            },
          ],
          next_cursor: 'djF8MjAyNS0wMS0wMVQwMDowMDowMC4wMDBafDAxOTJmMGM0LThhMWUtN2MzYi05YTUxLTNmMWQyYjdjOWUxMA',
        },
      },
    },
    errors: ['invalid_cursor'],
  },
];
