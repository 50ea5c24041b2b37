import type { JsonSchema, Operation } from '../openapi/operation';
import { listOf, ref } from '../openapi/common';
import { createKeySchema } from './schema';

/** OpenAPI operations of /keys (api/keys/routes.ts); responses as api/keys/present.ts answers them. */

const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
const nullableDateTime: JsonSchema = { type: ['string', 'null'], format: 'date-time' };
const tokenPrefix: JsonSchema = { type: 'string', pattern: '^svc_(live|test)_', description: 'The first 13 characters of the token.' };

/** The fields every key shape has (present.ts), before `token` or `revoked`. Never a token, never a hash. */
const keyFields: Record<string, JsonSchema> = {
  object: { const: 'key' },
  id: { type: 'string', format: 'uuid' },
  name: { type: 'string' },
  permission: { type: 'string', enum: ['send', 'full', 'admin'] },
  mode: { type: 'string', enum: ['live', 'test'] },
  token_prefix: { ...tokenPrefix, type: ['string', 'null'], description: 'The current token’s first 13 characters, for recognising it.' },
  domain_ids: {
    type: ['array', 'null'],
    items: { type: 'string', format: 'uuid' },
    description: 'The domains the key is confined to; null: every domain of the organization.',
  },
  rate_limit: { type: 'integer', minimum: 1, description: 'Requests per second: the key’s own cap or the default.' },
  created_at: dateTime,
  rotated_at: { ...nullableDateTime, description: 'When its current token was issued by a rotation; null if never rotated.' },
  previous_token_expires_at: {
    ...nullableDateTime,
    description: 'When the last token rotated out stops working; null when none is still in its 24 hours.',
  },
  previous_tokens: {
    type: 'array',
    description: 'Each token rotated out that still works, newest first, each until its own expiry.',
    items: {
      type: 'object',
      properties: { token_prefix: tokenPrefix, expires_at: dateTime },
      required: ['token_prefix', 'expires_at'],
      additionalProperties: false,
    },
  },
  revoked_at: nullableDateTime,
  last_used_at: { ...nullableDateTime, description: 'The second of the key’s last request (any token of it); null if never used.' },
};

const keyWith = (extra: Record<string, JsonSchema>): JsonSchema => ({
  type: 'object',
  properties: { ...keyFields, ...extra },
  required: [...Object.keys(keyFields), ...Object.keys(extra)],
  additionalProperties: false,
});

const token: JsonSchema = {
  type: 'string',
  pattern: '^svc_(live|test)_',
  description: 'The token: shown in this answer only (only its SHA-256 is stored).',
};

export const schemas: Record<string, JsonSchema> = {
  Key: keyWith({}),
  KeyWithToken: keyWith({ token }),
  RevokedKey: keyWith({ revoked: { const: true } }),
};

const keyParam = { id: { description: 'The key id.', schema: { type: 'string', format: 'uuid' } as JsonSchema } };

const example = {
  object: 'key',
  id: '0192f0c4-8a1e-7c3b-9a51-3f1d2b7c9e10',
  name: 'billing service',
  permission: 'send',
  mode: 'live',
  token_prefix: 'svc_live_Q2x9',
  domain_ids: null,
  rate_limit: 10,
  created_at: '2025-01-01T00:00:00.000Z',
  rotated_at: null,
  previous_token_expires_at: null,
  previous_tokens: [],
  revoked_at: null,
  last_used_at: null,
};
const exampleToken = 'svc_live_Q2x9bU7kR1mZ0pA4sT8vW3yX6nL5cE2d';

const keyLinks = {
  GetKey: { operationId: 'getKey', parameters: { id: '$response.body#/id' } },
  RotateKey: { operationId: 'rotateKey', parameters: { id: '$response.body#/id' } },
  RevokeKey: { operationId: 'revokeKey', parameters: { id: '$response.body#/id' } },
};

export const operations: Operation[] = [
  {
    method: 'post',
    path: '/keys',
    operationId: 'createKey',
    tag: 'Keys',
    summary: 'Create a key',
    description:
      'Answers the key and its token, shown this once. `permission: admin` is refused (403 `admin_key_not_mintable`: ADMIN keys are made in the console). ' +
      'A domain-restricted caller must pass `domain_ids`, all among its own (403 `forbidden_domain`).',
    permission: 'admin',
    body: createKeySchema,
    requestExample: { name: 'billing service', permission: 'send', mode: 'live' },
    responses: {
      201: { description: 'The key, with its token.', schema: ref('KeyWithToken'), example: { ...example, token: exampleToken } },
    },
    errors: ['admin_key_not_mintable', 'forbidden_domain'],
    links: { 201: keyLinks },
  },
  {
    method: 'get',
    path: '/keys',
    operationId: 'listKeys',
    tag: 'Keys',
    summary: 'List keys',
    description:
      'Every key of the organization the caller manages (a domain-restricted caller: those confined to its domains), newest first.',
    permission: 'admin',
    responses: {
      200: { description: 'The keys (one page: no cursor).', schema: listOf('Key'), example: { object: 'list', data: [example] } },
    },
    errors: [],
  },
  {
    method: 'get',
    path: '/keys/{id}',
    operationId: 'getKey',
    tag: 'Keys',
    summary: 'Retrieve a key',
    permission: 'admin',
    params: keyParam,
    responses: { 200: { description: 'The key.', schema: ref('Key'), example } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/keys/{id}/rotate',
    operationId: 'rotateKey',
    tag: 'Keys',
    summary: 'Rotate a key',
    description:
      'Issues a new token for the same key; the token it replaces keeps working for 24 hours (and each one rotated out before it until its own expiry).',
    permission: 'admin',
    params: keyParam,
    responses: {
      200: {
        description: 'The key, with its new token.',
        schema: ref('KeyWithToken'),
        example: {
          ...example,
          token_prefix: 'svc_live_Hn3c',
          rotated_at: '2025-01-02T00:00:00.000Z',
          previous_token_expires_at: '2025-01-03T00:00:00.000Z',
          previous_tokens: [{ token_prefix: 'svc_live_Q2x9', expires_at: '2025-01-03T00:00:00.000Z' }],
          token: 'svc_live_Hn3cP0qL8wX2vB6mK4tR7zY1aD5eS9fG',
        },
      },
    },
    errors: ['not_found', 'admin_key_not_mintable', 'key_revoked', 'rotation_conflict'],
  },
  {
    method: 'delete',
    path: '/keys/{id}',
    operationId: 'revokeKey',
    tag: 'Keys',
    summary: 'Revoke a key',
    description: 'At once, every token of it. Idempotent: revoking a revoked key answers it again.',
    permission: 'admin',
    params: keyParam,
    responses: {
      200: {
        description: 'The revoked key.',
        schema: ref('RevokedKey'),
        example: { ...example, revoked_at: '2025-01-02T00:00:00.000Z', revoked: true },
      },
    },
    errors: ['not_found'],
  },
];
