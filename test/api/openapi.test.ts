import assert from 'node:assert/strict';
import Ajv2020 from 'ajv/dist/2020';
import SwaggerParser from '@apidevtools/swagger-parser';
import * as yup from 'yup';
import { buildDocument } from '../../api/openapi/document';
import { allOperations } from '../../api/openapi/operations';
import { ecmaPattern, yupToJsonSchema } from '../../api/openapi/yup-json-schema';
import { sendEmailSchema } from '../../core/emails/schema';
import { listEmailsQuerySchema } from '../../api/emails/schema';
import { updateOrganizationSchema } from '../../api/organization/schema';
import { createKeySchema } from '../../api/keys/schema';
import { checkContract } from '../support/contract';
import { declaredRoutes } from '../support/api-routes';
import { request } from '../support/http';
import { closeBrowser, launchBrowser } from '../support/browser';
import { sharedService, type TestEnv } from '../support/service';

/**
 * The OpenAPI document (issue 39): the yup → JSON Schema converter is never stricter than the
 * validators, the document is valid OpenAPI 3.1 and covers exactly the routes the API declares, it
 * is served (with its reference page, offline), and the contract check that holds every API test's
 * answers to it does fail when an answer breaks it.
 */

const ajv = new Ajv2020({ strict: false, allErrors: true });
const jsonValid = (schema: object, value: unknown) => ajv.validate(schema, value);

/** A small deterministic PRNG, so a failure names a reproducible case. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Values of every JSON type, near the rules' edges (lengths, astral characters, line breaks, numbers as text). */
const VALUES: unknown[] = [
  undefined,
  null,
  '',
  'a',
  ' a ',
  'a@x.test',
  'Ann <ann@x.test>',
  'line\nbreak',
  '😀',
  '😀'.repeat(33),
  'x'.repeat(64),
  'x'.repeat(65),
  'x'.repeat(999),
  'bulk.news',
  '5',
  'true',
  'live',
  'queued',
  'send',
  'admin',
  'application/pdf',
  'dGVzdA==',
  '2026-01-01T00:00:00Z',
  0,
  1,
  -1,
  1.5,
  25,
  100,
  101,
  1000,
  1001,
  true,
  false,
  [],
  ['a@x.test'],
  [{ name: 'n', value: 'v' }],
  [{ filename: 'a.txt', content: 'dGVzdA==' }],
  {},
  { opens: true },
  { a: 1 },
];

/** Random bodies over the schema's fields (and one unknown), each field from VALUES. */
function* samples(schema: yup.AnyObjectSchema, n: number, base: object = {}, seed = 1): Generator<Record<string, unknown>> {
  const next = rng(seed);
  const names = [...Object.keys(schema.fields), 'unknown_field'];
  for (let i = 0; i < n; i++) {
    const body: Record<string, unknown> = { ...base };
    for (let changes = 1 + Math.floor(next() * 3); changes > 0; changes--) {
      const k = names[Math.floor(next() * names.length)];
      const v = VALUES[Math.floor(next() * VALUES.length)];
      if (v === undefined) delete body[k];
      else body[k] = v;
    }
    yield body;
  }
}

/** Whatever yup accepts, the converted schema accepts (the document may be looser, never stricter). */
function assertNeverStricter(schema: yup.AnyObjectSchema, base: object = {}, n = 3000) {
  const json = yupToJsonSchema(schema);
  let accepted = 0;
  for (const body of samples(schema, n, base)) {
    if (!schema.isValidSync(body)) continue;
    accepted++;
    assert.ok(jsonValid(json, body), `yup accepts ${JSON.stringify(body)} but the JSON Schema refuses it: ${ajv.errorsText()}`);
  }
  return accepted;
}

describe('OpenAPI: yup schemas as JSON Schema', () => {
  it('converts the send body: fields, required, no unknown fields, lengths, patterns, arrays, nested objects', () => {
    const s = yupToJsonSchema(sendEmailSchema) as any;
    assert.equal(s.type, 'object');
    assert.equal(s.additionalProperties, false);
    assert.deepEqual(s.required, ['from', 'to', 'subject']);
    assert.deepEqual(s.properties.subject, { type: 'string', minLength: 1, maxLength: 998, pattern: '^[^\\r\\n]*$' });
    // A custom rule (an address list) has no JSON Schema form: nothing is said rather than too much.
    assert.deepEqual(s.properties.to, {});
    assert.equal(s.properties.tags.type, 'array');
    assert.equal(s.properties.tags.maxItems, 20);
    assert.deepEqual(s.properties.tags.items.required, ['name', 'value']);
    assert.equal(s.properties.tags.items.additionalProperties, false);
    assert.deepEqual(s.properties.track, {
      type: 'object',
      properties: { opens: { type: 'boolean' }, clicks: { type: 'boolean' } },
      additionalProperties: false,
    });
    assert.equal(s.properties.kind.pattern, '^[A-Za-z0-9_.:-]+$');
  });

  it('converts numbers, enums, nullable fields and defaults', () => {
    const org = yupToJsonSchema(updateOrganizationSchema) as any;
    assert.deepEqual(org.properties.daily_send_cap, { type: ['integer', 'null'], minimum: 0, maximum: 1_000_000_000 });
    assert.equal(org.required, undefined);
    const key = yupToJsonSchema(createKeySchema) as any;
    assert.deepEqual(key.properties.permission, { type: 'string', enum: ['send', 'full', 'admin'] });
    assert.deepEqual(key.required, ['name', 'permission', 'mode']);
    assert.deepEqual(key.properties.domain_ids.minItems, 1);
    const nullableEnum = yupToJsonSchema(yup.string().strict().oneOf(['a', 'b']).nullable());
    assert.deepEqual(nullableEnum, { type: ['string', 'null'], enum: ['a', 'b', null] });
    const described = yupToJsonSchema(yup.string().strict().meta({ description: 'What it is.' }).default('x'));
    assert.deepEqual(described, { type: 'string', description: 'What it is.', default: 'x' });
  });

  it('converts a list query to the target types (values arrive as strings), defaults kept', () => {
    const q = yupToJsonSchema(listEmailsQuerySchema, 'query') as any;
    assert.deepEqual(q.properties.limit, { type: 'integer', minimum: 1, maximum: 100, default: 25 });
    assert.equal(q.properties.status.type, 'string');
    assert.ok(q.properties.status.enum.includes('queued'));
    assert.equal(q.additionalProperties, undefined, 'a loose object strips unknown fields rather than refusing them');
    // Whatever a query value yup accepts, typed as the document says, the document accepts.
    for (const v of [0, 1, 25, 100, 101, 1.5, -1, 'abc', true, '']) {
      const ok = listEmailsQuerySchema.isValidSync({ limit: String(v) });
      if (ok) assert.ok(jsonValid(q.properties.limit, v), `limit=${v}`);
    }
  });

  it('is looser where yup coerces: a field that is not strict accepts what yup casts', () => {
    const loose = yup.object({ n: yup.number().integer().min(1), s: yup.string().max(3), b: yup.boolean() }).noUnknown();
    const s = yupToJsonSchema(loose) as any;
    assert.deepEqual(s.properties.n.type, ['integer', 'string']);
    assert.deepEqual(s.properties.s.type, ['string', 'number', 'boolean']);
    assert.deepEqual(s.properties.b.type, ['boolean', 'string', 'number']);
    assert.equal(s.additionalProperties, undefined);
    // yup compares the cast value: 5 passes oneOf(['5']), so a loose field has no enum.
    assert.deepEqual(yupToJsonSchema(yup.string().oneOf(['5'])), { type: ['string', 'number', 'boolean'] });
    // Strictness runs down: a strict object's loose fields are not cast either.
    const strict = yupToJsonSchema(yup.object({ n: yup.number() }).strict()) as any;
    assert.equal(strict.properties.n.type, 'number');
  });

  it('leaves out what JSON Schema cannot say as yup means it: flags, lazy schemas, custom tests', () => {
    assert.equal(ecmaPattern(/^a$/i), undefined);
    assert.equal(ecmaPattern(/^[\w-]+$/), '^[\\w-]+$');
    assert.equal(ecmaPattern(/\_/), undefined, 'not valid with the u flag');
    assert.deepEqual(yupToJsonSchema(yup.lazy(() => yup.string()) as unknown as yup.AnySchema), {});
    assert.deepEqual(
      yupToJsonSchema(
        yup
          .string()
          .strict()
          .test('x', 'x', () => false),
      ),
      { type: 'string' },
    );
    // yup counts UTF-16 units, JSON Schema code points: a lower bound above 1 is halved.
    assert.equal((yupToJsonSchema(yup.string().strict().min(4)) as any).minLength, 2);
  });

  it('is never stricter than the validator, on random bodies', () => {
    const schemas: [string, yup.AnyObjectSchema, object][] = [
      ['send', sendEmailSchema, { from: 'a@x.test', to: 'b@x.test', subject: 's', text: 't' }],
      ['organization', updateOrganizationSchema, {}],
      ['key', createKeySchema, { name: 'k', permission: 'send', mode: 'live' }],
      ['loose', yup.object({ n: yup.number().min(1), s: yup.string().min(2), b: yup.boolean(), a: yup.array(yup.number()) }), {}],
    ];
    for (const [name, schema, base] of schemas)
      assert.ok(assertNeverStricter(schema, base) > 100, `${name}: too few accepted samples to mean anything`);
  });

  it('is never stricter than any request validator of the API, on random bodies and queries', () => {
    const typed = VALUES.filter((v) => v !== undefined && v !== null && typeof v !== 'object');
    for (const op of allOperations) {
      const example = typeof op.requestExample === 'object' && !Array.isArray(op.requestExample) ? op.requestExample! : {};
      if (op.body instanceof yup.ObjectSchema) assertNeverStricter(op.body, example, 500);
      if (!(op.query instanceof yup.ObjectSchema)) continue;
      // A query value arrives as text: whatever yup accepts as String(v), the parameter's schema accepts as v.
      const props = (yupToJsonSchema(op.query, 'query') as { properties: Record<string, object> }).properties;
      const typeOf = (v: unknown) => (typeof v === 'number' ? (Number.isInteger(v) ? ['integer', 'number'] : ['number']) : [typeof v]);
      for (const [name, schema] of Object.entries(props as Record<string, { type?: string | string[] }>))
        for (const v of typed.filter((x) => typeOf(x).some((t) => [schema.type ?? t].flat().includes(t))))
          if (op.query.isValidSync({ [name]: String(v) }))
            assert.ok(
              jsonValid(schema, v),
              `${op.operationId}: ${name}=${String(v)} passes yup, the document refuses ${JSON.stringify(v)}`,
            );
    }
  });
});

describe('OpenAPI: the document', () => {
  it('is a valid OpenAPI 3.1 document (swagger-parser)', async () => {
    const doc = structuredClone(buildDocument()) as unknown as Parameters<typeof SwaggerParser.validate>[0];
    await SwaggerParser.validate(doc);
  });

  it('has one operation for every route the API declares under /api/v1, and none more', () => {
    const declared = declaredRoutes()
      .filter((r) => r.split(' ')[1].startsWith('/api/v1'))
      .sort();
    const documented = allOperations.map((op) => `${op.method.toUpperCase()} /api/v1${op.path.replace(/\{[^}]+\}/g, ':x')}`).sort();
    const duplicated = documented.filter((r, i) => documented.indexOf(r) !== i);
    assert.deepEqual(duplicated, [], `routes documented twice: ${duplicated.join(', ')}`);
    const missing = declared.filter((r) => !documented.includes(r));
    const extra = documented.filter((r) => !declared.includes(r));
    assert.deepEqual(
      { missing, extra },
      { missing: [], extra: [] },
      `undocumented routes: ${missing.join(', ')}; operations of no route: ${extra.join(', ')}`,
    );
  });

  it('gives every operation an id, a summary, a tag and its error responses', () => {
    const doc = buildDocument() as { paths: Record<string, Record<string, any>> };
    for (const [p, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        const where = `${method.toUpperCase()} ${p}`;
        assert.ok(op.operationId && op.summary && op.tags?.length, where);
        const statuses = Object.keys(op.responses);
        assert.ok(
          statuses.some((s) => s.startsWith('2')),
          `${where}: no success answer`,
        );
        if (op.operationId !== 'getOpenApiDocument') {
          assert.ok(statuses.includes('401') && statuses.includes('429'), `${where}: authentication and rate limit errors`);
          assert.equal(op.responses['429'].headers['Retry-After'].schema.type, 'string');
        }
      }
    }
  });
});

describe('OpenAPI: served, and the contract check', function () {
  this.timeout(120_000);
  let env: TestEnv;

  before(async () => {
    env = await sharedService();
  });
  after(closeBrowser);

  it('serves the document without a key, equal to buildDocument()', async () => {
    const res = await request(env.url, 'GET', '/api/v1/openapi.json');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.deepEqual(res.body, JSON.parse(JSON.stringify(buildDocument())));
    // Routing stays case-sensitive.
    assert.equal((await request(env.url, 'GET', '/api/v1/OPENAPI.JSON')).status, 404);
    assert.equal((await request(env.url, 'POST', '/api/v1/openapi.json', { body: {} })).status, 405);
  });

  it('serves the reference page and its script from this server, scripts from self only', async () => {
    const page = await request(env.url, 'GET', '/docs');
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(page.body, /<redoc spec-url="\/api\/v1\/openapi.json"/);
    assert.match(page.body, /<script src="\/docs\/redoc.standalone.js"><\/script>/);
    assert.doesNotMatch(page.body, /https?:\/\//, 'nothing from another origin');
    const csp = page.headers.get('content-security-policy') ?? '';
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /default-src 'none'/);
    const script = await request(env.url, 'GET', '/docs/redoc.standalone.js');
    assert.equal(script.status, 200);
    assert.match(script.headers.get('content-type') ?? '', /^text\/javascript/);
    assert.ok((script.body as string).length > 500_000, 'the Redoc bundle');
    assert.doesNotMatch((script.body as string).slice(-200), /sourceMappingURL/);
    assert.doesNotMatch(script.body as string, /cdn\.redoc\.ly/, 'no image from elsewhere');
  });

  it('renders the reference in a browser under its policy, offline', async () => {
    const browser = await launchBrowser();
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const problems: string[] = [];
      const foreign: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') problems.push(m.text());
      });
      page.on('pageerror', (e) => problems.push(e.message));
      page.on('request', (r) => {
        if (!r.url().startsWith(env.url) && !r.url().startsWith('blob:') && !r.url().startsWith('data:')) foreign.push(r.url());
      });
      await page.goto(`${env.url}/docs`);
      await page.locator('h2', { hasText: 'Send an email' }).first().waitFor({ timeout: 60_000 });
      // Its search runs in a worker made from a blob, which the page's policy allows.
      await page.getByPlaceholder('Search...').fill('webhook');
      await page.locator('[data-role="search:results"] li').first().waitFor({ state: 'attached', timeout: 20_000 });
      assert.deepEqual(foreign, [], 'requests to other origins');
      assert.deepEqual(problems, [], 'console errors or policy violations');
    } finally {
      await context.close();
    }
  });

  it('fails on an undocumented field, an undocumented status and an undocumented endpoint', async () => {
    const res = await request(env.url, 'GET', '/api/v1/openapi.json');
    const base = { method: 'GET', path: '/api/v1/openapi.json', status: 200, headers: res.headers, body: res.body };
    checkContract(base);
    const org = await request(env.url, 'GET', '/api/v1/organization');
    assert.equal(org.status, 401);
    const unauthorized = { method: 'GET', path: '/api/v1/organization', status: 401, headers: org.headers, body: org.body };
    checkContract(unauthorized);
    assert.throws(
      () => checkContract({ ...unauthorized, body: { error: { ...org.body.error, hint: 'x' } } }),
      /GET \/organization → 401: the body does not match the document[\s\S]*additional properties/,
    );
    assert.throws(
      () => checkContract({ ...unauthorized, body: { error: { ...org.body.error, code: 'not_found' } } }),
      /GET \/organization → 401: the body does not match[\s\S]*allowed values/,
    );
    assert.throws(() => checkContract({ ...unauthorized, status: 418 }), /GET \/organization → 418: status not documented/);
    assert.throws(() => checkContract({ ...base, path: '/api/v1/nowhere' }), /GET \/api\/v1\/nowhere → 200: no operation/);
    assert.throws(
      () => checkContract({ ...base, method: 'DELETE', status: 204, body: null }),
      /DELETE \/api\/v1\/openapi.json → 204: no operation/,
    );
    // The router's own 404 and 405 for unknown paths and methods are not the document's.
    const unknown = await request(env.url, 'GET', '/api/v1/nowhere');
    assert.equal(unknown.status, 404);
    const rateLimited = { ...unauthorized, status: 429, body: { error: { code: 'rate_limited', message: 'slow down' } } };
    assert.throws(() => checkContract(rateLimited), /GET \/organization → 429: the required header Retry-After is missing/);
  });
});
