import type { AnySchema } from 'yup';
import type { ErrorCode } from '../../core/errors';

/**
 * The OpenAPI document is built from these (api/openapi/document.ts): one per route of /api/v1,
 * beside its routes in api/<resource>/openapi.ts. Requests are described by the very yup schemas
 * the routes validate with (converted, api/openapi/yup-json-schema.ts), so the document cannot
 * drift from the validators; responses by JSON Schemas that the contract test holds every API
 * test's responses to (test/support/contract.ts), so they cannot drift from the answers either.
 */

/** A JSON Schema (2020-12, as OpenAPI 3.1 uses), possibly a `$ref` to `#/components/schemas/<Name>`. */
export type JsonSchema = { [k: string]: unknown };

export interface ResponseSpec {
  description: string;
  /** The body's schema; absent: no body. */
  schema?: JsonSchema;
  /** Headers the answer carries, e.g. `Idempotent-Replayed`. */
  headers?: Record<string, { description: string; schema: JsonSchema }>;
  example?: unknown;
}

export interface Operation {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** The path under /api/v1 in OpenAPI's style: `/emails/{id}`. */
  path: string;
  /** Unique, camelCase: `sendEmail`, `listEmails`. Links and clients use it. */
  operationId: string;
  summary: string;
  description?: string;
  /** The resource, as the reference page groups operations: `Emails`, `Keys`, ... */
  tag: string;
  /** The key tier the route needs (`requirePermission`); absent: any key. */
  permission?: 'send' | 'full' | 'admin';
  /** False only for the document itself (GET /openapi.json). */
  authenticated?: boolean;
  /** Path parameters, by name: their schema and meaning. */
  params?: Record<string, { description: string; schema: JsonSchema }>;
  /** The yup schema the route validates its query with (validateQuery). */
  query?: AnySchema;
  /** The yup schema the route validates its JSON body with, or a JSON Schema where the route checks the shape itself (a batch's array). */
  body?: AnySchema | { json: JsonSchema };
  /** Request headers the route reads, e.g. `Idempotency-Key`. */
  headers?: Record<string, { description: string; schema: JsonSchema; required?: boolean }>;
  requestExample?: unknown;
  /** Successful answers by status. */
  responses: Record<number, ResponseSpec>;
  /**
   * Error codes this route answers besides those every route of its kind can (document.ts adds
   * authentication, rate limit, body reading and validation errors by itself). Statuses come from
   * the catalogue (core/errors.ts).
   */
  errors: ErrorCode[];
  /** OpenAPI links from a successful answer to other operations (schemathesis follows them): by status, by link name. */
  links?: Record<number, Record<string, { operationId: string; parameters: Record<string, string> }>>;
}
