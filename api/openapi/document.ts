import * as yup from 'yup';
import type { AnySchema } from 'yup';
import { ERRORS, type ErrorCode } from '../../core/errors';
import { version } from '../../package.json';
import { bearerScheme, commonSchemas, ref, retryAfterHeader } from './common';
import type { JsonSchema, Operation } from './operation';
import { allOperations, allSchemas } from './operations';
import { isRequiredField, yupToJsonSchema } from './yup-json-schema';

/**
 * The OpenAPI 3.1 document of /api/v1, built once from every resource's operations
 * (api/<resource>/openapi.ts, listed in api/openapi/operations.ts): requests from the yup schemas
 * the routes validate with, responses from hand-written JSON Schemas, and one error response per
 * status the route can answer, its `code` narrowed to the codes of that status.
 */

const AUTHENTICATION: ErrorCode[] = ['missing_api_key', 'invalid_api_key', 'rate_limited', 'forbidden'];
const BODY: ErrorCode[] = ['invalid_json', 'invalid_body', 'payload_too_large', 'unsupported_media_type', 'validation_error'];

/** Every error code an operation can answer: its own and those of its kind (authentication, body, query). */
export function errorCodes(op: Operation): ErrorCode[] {
  const codes = new Set<ErrorCode>();
  if (op.authenticated !== false) {
    AUTHENTICATION.forEach((c) => codes.add(c));
    if (op.permission === 'admin') codes.add('test_key_not_allowed');
  }
  if (op.body) BODY.forEach((c) => codes.add(c));
  if (op.query) codes.add('validation_error');
  op.errors.forEach((c) => codes.add(c));
  return [...codes];
}

const isYup = (s: unknown): s is AnySchema => yup.isSchema(s);

function queryParameters(schema: AnySchema): object[] {
  if (!(schema instanceof yup.ObjectSchema)) throw new Error('a query schema must be a yup object');
  const strict = schema.spec.strict === true;
  return Object.entries(schema.fields as Record<string, AnySchema>).map(([name, field]) => {
    const converted = yupToJsonSchema(field, 'query');
    const { description, ...rest } = converted;
    return {
      name,
      in: 'query',
      required: isRequiredField(field, strict),
      ...(typeof description === 'string' ? { description } : {}),
      schema: rest,
    };
  });
}

function parameters(op: Operation): object[] {
  const names = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
  const declared = Object.keys(op.params ?? {});
  const extra = declared.filter((n) => !names.includes(n));
  if (extra.length) throw new Error(`${op.operationId}: params ${extra.join(', ')} are not in ${op.path}`);
  const path = names.map((name) => {
    const p = op.params?.[name] ?? { description: `The ${name}.`, schema: { type: 'string' } };
    return { name, in: 'path', required: true, description: p.description, schema: p.schema };
  });
  const headers = Object.entries(op.headers ?? {}).map(([name, h]) => ({
    name,
    in: 'header',
    required: h.required ?? false,
    description: h.description,
    schema: h.schema,
  }));
  return [...path, ...(op.query ? queryParameters(op.query) : []), ...headers];
}

function requestBody(op: Operation): object | undefined {
  if (!op.body) return undefined;
  const schema = isYup(op.body) ? yupToJsonSchema(op.body, 'body') : op.body.json;
  return {
    required: true,
    content: { 'application/json': { schema, ...(op.requestExample !== undefined ? { example: op.requestExample } : {}) } },
  };
}

/** The error envelope whose `code` is one of `codes` (all of one status). */
export const errorSchema = (codes: readonly string[]): JsonSchema => ({
  allOf: [ref('ErrorEnvelope'), { properties: { error: { properties: { code: { enum: [...codes] } } } } }],
});

function responses(op: Operation): Record<string, object> {
  const out: Record<string, object> = {};
  for (const [status, r] of Object.entries(op.responses)) {
    const links = op.links?.[Number(status)];
    out[status] = {
      description: r.description,
      ...(r.headers ? { headers: r.headers } : {}),
      ...(r.schema
        ? { content: { 'application/json': { schema: r.schema, ...(r.example !== undefined ? { example: r.example } : {}) } } }
        : {}),
      ...(links ? { links } : {}),
    };
  }
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorCodes(op)) {
    const status: number = ERRORS[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  for (const [status, codes] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    if (out[status]) throw new Error(`${op.operationId}: ${status} is both a success and an error`);
    out[status] = {
      description: codes.map((c) => `\`${c}\`: ${ERRORS[c].when}`).join('\n\n'),
      ...(status === 429
        ? { headers: { 'Retry-After': { ...retryAfterHeader, required: codes.every((c) => c === 'rate_limited') } } }
        : {}),
      content: { 'application/json': { schema: errorSchema(codes) } },
    };
  }
  return out;
}

const PERMISSION = { send: 'any key (SEND, FULL or ADMIN)', full: 'a FULL or ADMIN key', admin: 'an ADMIN live key' } as const;

function operation(op: Operation): object {
  const needs = op.authenticated === false ? 'No API key needed.' : `Needs ${PERMISSION[op.permission ?? 'send']}.`;
  const body = requestBody(op);
  const params = parameters(op);
  return {
    operationId: op.operationId,
    summary: op.summary,
    description: op.description ? `${op.description}\n\n${needs}` : needs,
    tags: [op.tag],
    ...(op.permission ? { 'x-permission': op.permission } : {}),
    security: op.authenticated === false ? [] : [{ bearerAuth: [] }],
    ...(params.length ? { parameters: params } : {}),
    ...(body ? { requestBody: body } : {}),
    responses: responses(op),
  };
}

function build(): object {
  const paths: Record<string, Record<string, object>> = {};
  const ids = new Set<string>();
  const tags: string[] = [];
  for (const op of allOperations) {
    if (ids.has(op.operationId)) throw new Error(`operationId ${op.operationId} is used twice`);
    ids.add(op.operationId);
    const item = (paths[op.path] ??= {});
    if (item[op.method]) throw new Error(`${op.method.toUpperCase()} ${op.path} is declared twice`);
    item[op.method] = operation(op);
    if (!tags.includes(op.tag)) tags.push(op.tag);
  }
  for (const op of allOperations)
    for (const links of Object.values(op.links ?? {}))
      for (const [name, l] of Object.entries(links))
        if (!ids.has(l.operationId)) throw new Error(`${op.operationId}: link ${name} names no operation ${l.operationId}`);
  return {
    openapi: '3.1.0',
    info: {
      title: 'svc-mail API',
      version,
      description:
        'Transactional and bulk email, contacts, templates, webhooks, broadcasts and automations. Every request carries an API key (`Authorization: Bearer <key>`); every error answers one envelope, `{"error": {"code", "message", "details"?}}`, its code from the catalogue (docs/api.md).',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    servers: [{ url: '/api/v1' }],
    tags: tags.map((name) => ({ name })),
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      schemas: { ...commonSchemas, ...allSchemas },
      securitySchemes: { bearerAuth: bearerScheme },
    },
  };
}

let cached: object | undefined;

/** The document (built on first use, then the same object). */
export function buildDocument(): object {
  return (cached ??= build());
}

/** Its JSON, as GET /api/v1/openapi.json answers it. */
let cachedJson: string | undefined;
export function documentJson(): string {
  return (cachedJson ??= JSON.stringify(buildDocument()));
}
