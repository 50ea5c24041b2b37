import * as yup from 'yup';
import type { AnySchema } from 'yup';
import type { JsonSchema } from './operation';

/**
 * A yup schema as JSON Schema 2020-12, from `describe()` and the schema objects (describe drops
 * `strict`). The result may be looser than the validator, never stricter: a client (or
 * schemathesis) sending what the document calls invalid must be refused. So rules without a JSON
 * Schema form (custom `.test()`s, `trim` in strict mode, lazy schemas) emit nothing, and fields
 * yup coerces (not strict) accept the types it coerces from.
 *
 * - `body`: values are JSON as parsed; strictness (the schema's or an ancestor's) decides coercion.
 * - `query`: values arrive as strings and yup casts them; the schema is the target type (OpenAPI
 *   serialises parameters), so no coercion alternatives are added.
 */
export type Mode = 'body' | 'query';

type Described = ReturnType<AnySchema['describe']> & {
  tests?: { name?: string; params?: Record<string, unknown> }[];
  oneOf?: unknown[];
  notOneOf?: unknown[];
  nullable?: boolean;
  optional?: boolean;
  default?: unknown;
};

interface Ctx {
  mode: Mode;
  /** An ancestor is strict: yup validates the whole subtree without casting. */
  strict: boolean;
}

export function yupToJsonSchema(schema: AnySchema, mode: Mode = 'body'): JsonSchema {
  return convert(schema, { mode, strict: false });
}

/** Whether an object field fails when absent (in its object's context: a loose object fills defaults). */
export function isRequiredField(field: AnySchema, parentStrict: boolean): boolean {
  return !yup.object({ f: field }).strict(parentStrict).isValidSync({});
}

const isYup = (s: unknown): s is AnySchema => yup.isSchema(s) && (s as { type?: string }).type !== 'lazy';

function convert(schema: AnySchema, ctx: Ctx): JsonSchema {
  if (!isYup(schema)) return {};
  const strict = ctx.strict || schema.spec.strict === true;
  const d = schema.describe() as Described;
  const out: JsonSchema = {};
  const description = (d.meta as { description?: unknown } | undefined)?.description ?? d.label;
  if (typeof description === 'string' && description) out.description = description;
  const loose = ctx.mode === 'body' && !strict;
  const params = (name: string) => (d.tests ?? []).filter((t) => t.name === name).map((t) => t.params ?? {});
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
  let types: string[] = [];

  switch (schema.type) {
    case 'string': {
      // yup counts UTF-16 units, JSON Schema code points: an astral character is 2 of yup's but 1 of
      // the document's, so a lower bound above 1 is halved to stay looser than the validator.
      const lower = (n: number) => (n <= 1 ? n : Math.ceil(n / 2));
      types = loose ? ['string', 'number', 'boolean'] : ['string'];
      for (const p of params('min')) if (num(p.min) !== undefined) out.minLength = lower(num(p.min)!);
      for (const p of params('max')) if (num(p.max) !== undefined) out.maxLength = num(p.max);
      for (const p of params('length')) {
        const n = num(p.length);
        if (n !== undefined) Object.assign(out, { minLength: lower(n), maxLength: n });
      }
      // A required string refuses '' as well.
      if (params('required').length > 0 && out.minLength === undefined && !d.oneOf?.length) out.minLength = 1;
      const patterns = params('matches').flatMap((p) => {
        const pattern = ecmaPattern(p.regex);
        return pattern === undefined ? [] : [p.excludeEmptyString ? `^$|${pattern}` : pattern];
      });
      if (patterns.length === 1) out.pattern = patterns[0];
      else if (patterns.length > 1) out.allOf = patterns.map((pattern) => ({ pattern }));
      break;
    }
    case 'number': {
      const integer = params('integer').length > 0;
      types = [integer ? 'integer' : 'number', ...(loose ? ['string'] : [])];
      for (const p of params('min')) {
        if (num(p.min) !== undefined) out.minimum = num(p.min);
        if (num(p.more) !== undefined) out.exclusiveMinimum = num(p.more);
      }
      for (const p of params('max')) {
        if (num(p.max) !== undefined) out.maximum = num(p.max);
        if (num(p.less) !== undefined) out.exclusiveMaximum = num(p.less);
      }
      break;
    }
    case 'boolean':
      types = loose ? ['boolean', 'string', 'number'] : ['boolean'];
      break;
    case 'array': {
      types = ['array'];
      const inner = (schema as unknown as { innerType?: AnySchema }).innerType;
      if (inner) out.items = convert(inner, { ...ctx, strict });
      for (const p of params('min')) if (num(p.min) !== undefined) out.minItems = num(p.min);
      for (const p of params('max')) if (num(p.max) !== undefined) out.maxItems = num(p.max);
      for (const p of params('length')) {
        const n = num(p.length);
        if (n !== undefined) Object.assign(out, { minItems: n, maxItems: n });
      }
      break;
    }
    case 'object': {
      types = ['object'];
      const fields = (schema as unknown as { fields: Record<string, AnySchema> }).fields;
      const properties: Record<string, JsonSchema> = {};
      const required: string[] = [];
      for (const [name, field] of Object.entries(fields)) {
        properties[name] = convert(field, { ...ctx, strict });
        if (isYup(field) && isRequiredField(field, strict)) required.push(name);
      }
      out.properties = properties;
      if (required.length) out.required = required;
      // A loose object strips unknown fields instead of refusing them.
      if (strict && (schema.spec as { noUnknown?: boolean }).noUnknown) out.additionalProperties = false;
      break;
    }
    default:
      // mixed (and anything else): no type of its own.
      break;
  }

  const nullable = d.nullable === true;
  // `type` first: the document reads better.
  if (types.length)
    return finish({ type: nullable ? [...types, 'null'] : types.length === 1 ? types[0] : types, ...out }, d, schema, loose);
  return finish(out, d, schema, loose);
}

function finish(out: JsonSchema, d: Described, schema: AnySchema, loose: boolean): JsonSchema {
  const nullable = d.nullable === true;
  // A coerced value is compared after its cast (5 passes oneOf(['5'])): no enum then.
  if (d.oneOf?.length && !(loose && schema.type !== 'mixed'))
    out.enum = nullable && !d.oneOf.includes(null) ? [...d.oneOf, null] : [...d.oneOf];
  if (d.notOneOf?.length) out.not = { enum: [...d.notOneOf] };
  if (d.default !== undefined && schema.type !== 'object' && schema.type !== 'array' && typeof d.default !== 'function') {
    out.default = d.default;
  }
  return out;
}

/**
 * A RegExp as an ECMA-262 pattern as JSON Schema validators read it (unanchored search, `u` flag):
 * none (the rule is left out) when its flags change its meaning or it is not valid in unicode mode.
 */
export function ecmaPattern(regex: unknown): string | undefined {
  if (!(regex instanceof RegExp)) return undefined;
  if (/[imsy]/.test(regex.flags)) return undefined;
  try {
    new RegExp(regex.source, 'u');
  } catch {
    return undefined;
  }
  return regex.source;
}
