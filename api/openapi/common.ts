import type { JsonSchema } from './operation';

/**
 * Shared pieces of the OpenAPI document: the error envelope every failure answers, the list
 * envelope (api/cursor.ts listBody), the bearer scheme and the parameters many routes take.
 */

/** `#/components/schemas/<name>`. */
export const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });

/**
 * The list envelope: `{ object: 'list', data: [item...], next_cursor? }` — `next_cursor` only when
 * more pages exist (api/cursor.ts listBody). `item` is a schema or a component name.
 */
export function listOf(item: JsonSchema | string): JsonSchema {
  return {
    type: 'object',
    properties: {
      object: { const: 'list' },
      data: { type: 'array', items: typeof item === 'string' ? ref(item) : item },
      next_cursor: { type: 'string', description: 'Present only when more pages exist: pass it back as `cursor`.' },
    },
    required: ['object', 'data'],
    additionalProperties: false,
  };
}

/** The body of every error answer (api/middleware/errors.ts); document.ts narrows `code` per route and status. */
export function errorEnvelope(codes?: readonly string[]): JsonSchema {
  return {
    type: 'object',
    properties: {
      error: {
        type: 'object',
        properties: {
          code: codes ? { type: 'string', enum: [...codes] } : { type: 'string' },
          message: { type: 'string' },
          details: {
            type: 'array',
            items: {
              type: 'object',
              properties: { field: { type: 'string' }, message: { type: 'string' } },
              required: ['field', 'message'],
              additionalProperties: false,
            },
          },
          error_id: { type: 'string', format: 'uuid', description: 'Only on `internal_error`: also in the log line.' },
        },
        required: ['code', 'message'],
        additionalProperties: false,
      },
    },
    required: ['error'],
    additionalProperties: false,
  };
}

export const ErrorEnvelope: JsonSchema = errorEnvelope();

export const bearerScheme = {
  type: 'http',
  scheme: 'bearer',
  description: 'An API key: `Authorization: Bearer <key>`.',
} as const;

/** The `{id}` path parameter most resources take. */
export const idParam = { description: 'The resource id.', schema: { type: 'string' } as JsonSchema };

/** Schemas every module may `$ref`. */
export const commonSchemas: Record<string, JsonSchema> = { ErrorEnvelope };

/** The header a 429 carries (rate_limited and the daily quotas; 503 starting too). */
export const retryAfterHeader = {
  description: 'Seconds to wait before retrying.',
  schema: { type: 'string', pattern: '^[0-9]+$' } as JsonSchema,
};
