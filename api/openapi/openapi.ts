import type { JsonSchema, Operation } from './operation';

/** The document's own operation (api/openapi/routes.ts). */

export const schemas: Record<string, JsonSchema> = {
  OpenApiDocument: {
    type: 'object',
    description: 'An OpenAPI 3.1 document.',
    properties: {
      openapi: { type: 'string', pattern: '^3\\.1\\.' },
      info: { type: 'object' },
      paths: { type: 'object' },
    },
    required: ['openapi', 'info', 'paths'],
  },
};

export const operations: Operation[] = [
  {
    method: 'get',
    path: '/openapi.json',
    operationId: 'getOpenApiDocument',
    summary: 'This document',
    description: 'The OpenAPI 3.1 document of this API. The reference page at `/docs` reads it.',
    tag: 'Reference',
    authenticated: false,
    responses: { 200: { description: 'The document.', schema: { $ref: '#/components/schemas/OpenApiDocument' } } },
    errors: [],
  },
];
