import * as yup from 'yup';
import { ObjectSchema, ValidationError, type AnyObject, type AnySchema, type InferType } from 'yup';
import { validationError, type ServiceError } from './errors';

/** A JSON body's schema: exactly these fields (unknown ones refused, named), no type coercion. */
export const bodySchema = <T extends yup.ObjectShape>(shape: T) =>
  yup
    .object(shape)
    .noUnknown(({ unknown }) => `unknown field(s): ${unknown}`)
    .strict();

/** One line: header values, subjects, names. */
export const NO_LINE_BREAKS = /^[^\r\n]*$/;

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * yup's own wording of a wrong type ("must be a `string` type, but the final value was:
 * `true`."), as a person would write it (issue 51). Its default is read when a schema is built,
 * so it is rewritten here rather than by setLocale, which would miss schemas built before.
 */
const YUP_NOT_TYPE = /^(.*) must be a `(\w+)` type, but the final value was: [\s\S]*$/;
export function plainMessage(message: string): string {
  const m = YUP_NOT_TYPE.exec(message);
  if (!m) return message;
  const [, path, type] = m;
  return `${path} must be ${/^[aeiou]/.test(type) ? 'an' : 'a'} ${type}`;
}

/** Every failed yup rule as one `validation_error`, each rule a detail. */
export function fromYup(e: ValidationError): ServiceError {
  const details = (e.inner.length ? e.inner : [e]).map((x) => ({ field: x.path ?? '', message: plainMessage(x.message) }));
  return validationError(details.map((d) => d.message).join('; '), details);
}

/** Every failed rule as one 422 `validation_error`, each rule a detail. */
export function validate<S extends AnySchema>(schema: S, value: unknown): InferType<S> {
  try {
    return narrowed(schema, value).validateSync(value, { abortEarly: false });
  } catch (err) {
    if (err instanceof ValidationError) throw fromYup(err);
    throw err;
  }
}

const toWellFormed = (s: string): string => (s as unknown as { toWellFormed(): string }).toWellFormed();

/**
 * Makes every string of a request storable in PostgreSQL, or refuses the request:
 * - NUL (`\u0000`): text and jsonb cannot hold it, so it is a validation error naming the field;
 * - a lone surrogate (`\ud800`): not encodable in UTF-8, so it becomes U+FFFD, as any UTF-8
 *   encoder does (the message is stored; PostgreSQL's JSON parser would otherwise refuse it).
 * `check` says which to look for (a transport that knows one cannot occur skips it). The value
 * must nest boundedly (parsed JSON bodies nest at most MAX_JSON_DEPTH deep).
 */
export function storable(value: unknown, check: { nul: boolean; surrogate: boolean }): unknown {
  const walk = (v: unknown, path: string): unknown => {
    if (typeof v === 'string') {
      if (check.nul && v.includes('\u0000')) {
        throw validationError(`${path || 'body'} must not contain NUL characters`, [{ field: path, message: 'contains a NUL character' }]);
      }
      return check.surrogate ? toWellFormed(v) : v;
    }
    if (Array.isArray(v)) return v.map((x, i) => walk(x, `${path}[${i}]`));
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      // defineProperty, not assignment: a "__proto__" key stays a plain key.
      for (const [k, x] of Object.entries(v)) {
        Object.defineProperty(out, walk(k, path) as string, {
          value: walk(x, path ? `${path}.${k}` : k),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return out;
    }
    return v;
  };
  return walk(value, '');
}

/** What narrowing knows of one strict object schema, found once. */
interface Plan {
  /** Declared fields in declaration order (the order yup reports their errors in). */
  order: string[];
  declared: Set<string>;
  /** Fields that fail when absent (required ones): always checked. */
  mustCheck: Set<string>;
  /** The schema picked down to a set of fields, by the fields joined with commas. */
  picked: Map<string, AnySchema>;
}

const plans = new WeakMap<AnySchema, Plan | null>();
/** Distinct field sets remembered per schema; clients choose them, so the memory they take is bounded. */
const MAX_PICKED = 128;

/**
 * The schema to check `value` with: a strict object schema picked down to the fields the value
 * has, plus those that fail when absent. yup runs every declared field's rules on every call, and
 * a send declares 17 fields and usually carries 5, so that was most of what validating a batch
 * cost. The answer is the same: a strict schema neither casts nor fills defaults, so an absent
 * field can only fail as `undefined` does, which is tested once per field here (no schema of the
 * service has conditions or rules that read sibling fields). A value with a field the schema does
 * not declare is checked by the whole schema, which names it.
 */
function narrowed(schema: AnySchema, value: unknown): AnySchema {
  if (!isPlainObject(value)) return schema;
  let plan = plans.get(schema);
  if (plan === undefined) {
    plan = planOf(schema);
    plans.set(schema, plan);
  }
  if (plan === null) return schema;
  const keys = Object.keys(value);
  if (!keys.every((k) => plan.declared.has(k))) return schema;
  const wanted = plan.order.filter((k) => plan.mustCheck.has(k) || Object.hasOwn(value, k));
  if (wanted.length === plan.order.length) return schema;
  const key = wanted.join(',');
  let picked = plan.picked.get(key);
  if (!picked) {
    if (plan.picked.size >= MAX_PICKED) return schema;
    picked = (schema as ObjectSchema<AnyObject>).pick(wanted) as AnySchema;
    plan.picked.set(key, picked);
  }
  return picked;
}

function planOf(schema: AnySchema): Plan | null {
  if (!(schema instanceof ObjectSchema) || schema.spec.strict !== true) return null;
  const fields = Object.entries(schema.fields as Record<string, AnySchema>);
  // A field with conditions could fail differently depending on its siblings: such a schema is checked whole.
  if (fields.some(([, f]) => !(f instanceof yup.Schema) || (f as unknown as { conditions: unknown[] }).conditions.length > 0)) return null;
  return {
    order: fields.map(([k]) => k),
    declared: new Set(fields.map(([k]) => k)),
    mustCheck: new Set(fields.filter(([, f]) => !f.isValidSync(undefined)).map(([k]) => k)),
    picked: new Map(),
  };
}
