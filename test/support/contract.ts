import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { buildDocument } from '../../api/openapi/document';

/**
 * The contract check: every answer an API test receives (test/support/http.ts request()) against
 * the OpenAPI document (api/openapi/document.ts). It throws, naming `METHOD /template → status`,
 * when the endpoint is not in the document, the status is not documented for it, the body does not
 * validate against the documented schema (success, or the error envelope with that status's codes),
 * or a documented required header is missing. `CONTRACT=off` skips it (while a resource's
 * operations are being written; never in CI).
 */

export const API_PREFIX = '/api/v1';
const DOC_ID = 'https://svc.invalid/openapi.json';

interface Header {
  required?: boolean;
  schema?: Record<string, unknown>;
}
interface Response {
  headers?: Record<string, Header>;
  content?: Record<string, { schema?: unknown }>;
}
interface DocOperation {
  operationId: string;
  responses: Record<string, Response>;
}
interface Compiled {
  method: string;
  template: string;
  re: RegExp;
  /** Path parameters: fewer first, so `/emails/batch` wins over `/emails/{id}`. */
  params: number;
  op: DocOperation;
  pointer: string;
}

export interface ContractInput {
  method: string;
  /** The request's path, with its query if any: `/api/v1/emails?limit=2`. */
  path: string;
  status: number;
  headers: Headers | Record<string, string>;
  body: unknown;
}

let state: { ajv: Ajv2020; routes: Compiled[]; validators: Map<string, ValidateFunction> } | undefined;

const escapePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

function setup() {
  if (state) return state;
  const doc = buildDocument() as { paths: Record<string, Record<string, DocOperation>> };
  const ajv = new Ajv2020({ allErrors: true, strict: true, strictTypes: false, strictRequired: false, validateSchema: false });
  addFormats(ajv);
  // OpenAPI's own keywords beside JSON Schema's, and the document's top level (schemas are found in it by pointer).
  ajv.addVocabulary(['example', 'discriminator', 'xml', 'externalDocs']);
  ajv.addVocabulary(['openapi', 'info', 'jsonSchemaDialect', 'servers', 'tags', 'security', 'paths', 'components', 'webhooks']);
  ajv.addSchema(doc, DOC_ID);
  const routes: Compiled[] = [];
  for (const [template, item] of Object.entries(doc.paths)) {
    const source = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}/g, '[^/]+');
    for (const [method, op] of Object.entries(item)) {
      routes.push({
        method: method.toUpperCase(),
        template,
        re: new RegExp(`^${source}$`),
        params: (template.match(/\{/g) ?? []).length,
        op,
        pointer: `/paths/${escapePointer(template)}/${method}`,
      });
    }
  }
  routes.sort((a, b) => a.params - b.params);
  state = { ajv, routes, validators: new Map() };
  return state;
}

/** The path as the document's templates are written: without /api/v1, and without a trailing slash (the router ignores it). */
const templatePath = (path: string) => path.slice(API_PREFIX.length).replace(/(.)\/$/, '$1') || '/';

/** The documented operation of a request (the path without /api/v1 and the query). */
export function findOperation(method: string, path: string): { template: string; operationId: string } | undefined {
  const bare = templatePath(path.split('?')[0]);
  const r = setup().routes.find((x) => x.method === method.toUpperCase() && x.re.test(bare));
  return r && { template: r.template, operationId: r.op.operationId };
}

const header = (h: ContractInput['headers'], name: string): string | null =>
  h instanceof Headers ? h.get(name) : (Object.entries(h).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1] ?? null);

/** Throws when the answer breaks the document (see the top of this file). */
export function checkContract(input: ContractInput): void {
  if (process.env.CONTRACT === 'off') return;
  const path = input.path.split('?')[0];
  if (!path.startsWith(`${API_PREFIX}/`) && path !== API_PREFIX) return;
  const method = input.method.toUpperCase();
  if (method === 'HEAD' || method === 'OPTIONS') return;
  const { ajv, routes, validators } = setup();
  const bare = templatePath(path);
  const route = routes.find((r) => r.method === method && r.re.test(bare));
  const code = (input.body as { error?: { code?: unknown } } | null)?.error?.code;
  if (!route) {
    // Unknown paths and methods answer the router's own 404 and 405.
    if ((input.status === 404 && code === 'route_not_found') || input.status === 405) return;
    throw new Error(`contract: ${method} ${path} → ${input.status}: no operation of the OpenAPI document matches this endpoint`);
  }
  const where = `contract: ${method} ${route.template} → ${input.status}`;
  const response = route.op.responses[String(input.status)];
  if (!response) {
    const documented = Object.keys(route.op.responses).join(', ');
    throw new Error(`${where}: status not documented (documented: ${documented}); body ${JSON.stringify(input.body)?.slice(0, 500)}`);
  }
  for (const [name, h] of Object.entries(response.headers ?? {})) {
    const value = header(input.headers, name);
    if (value === null) {
      if (h.required) throw new Error(`${where}: the required header ${name} is missing`);
      continue;
    }
    if (h.schema) {
      const check = ajv.compile(h.schema);
      const asJson = (() => {
        try {
          return JSON.parse(value) as unknown;
        } catch {
          return undefined;
        }
      })();
      if (!check(value) && (asJson === undefined || !check(asJson)))
        throw new Error(`${where}: header ${name}: ${JSON.stringify(value)} ${ajv.errorsText(check.errors)}`);
    }
  }
  const content = response.content?.['application/json'];
  if (!content) {
    if (input.body !== null && input.body !== '' && input.body !== undefined)
      throw new Error(`${where}: documented without a body, answered ${JSON.stringify(input.body).slice(0, 300)}`);
    return;
  }
  const type = header(input.headers, 'content-type') ?? '';
  if (!/^application\/json\b/i.test(type)) throw new Error(`${where}: Content-Type ${JSON.stringify(type)}, documented application/json`);
  const key = `${route.pointer} ${input.status}`;
  let validate = validators.get(key);
  if (!validate) {
    validate = ajv.compile({
      $ref: `${DOC_ID}#${route.pointer}/responses/${input.status}/content/${escapePointer('application/json')}/schema`,
    });
    validators.set(key, validate);
  }
  if (!validate(input.body)) {
    const errors = (validate.errors ?? []).map((e) => `${e.instancePath || '(body)'} ${e.message} ${JSON.stringify(e.params)}`);
    throw new Error(
      `${where}: the body does not match the document:\n  ${errors.join('\n  ')}\nbody: ${JSON.stringify(input.body)?.slice(0, 1500)}`,
    );
  }
}
