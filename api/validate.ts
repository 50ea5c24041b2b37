import type Koa from 'koa';
import * as yup from 'yup';
import type { AnyObject, AnySchema, InferType, ObjectSchema } from 'yup';
import { validationError } from '../core/errors';
import { isPlainObject, NO_LINE_BREAKS, validate } from '../core/validate';

/** The name of a managed resource (topic, segment, template): 1–200 characters on one line. */
export const resourceName = () => yup.string().strict().trim().min(1).max(200).matches(NO_LINE_BREAKS, 'name must not contain line breaks');

/** `limit` and `cursor` of a list (the envelope and keyset paging of api/cursor.ts). */
export const listQuerySchema = yup.object({
  limit: yup.number().integer('limit must be an integer').min(1).max(100).default(25),
  cursor: yup.string(),
});
import { readJsonBody } from './middleware/json-body';

/**
 * Query parameters against an object schema. yup's noUnknown strips rather than rejects when it
 * coerces (limit arrives as a string), so unknown and repeated parameters are refused here. Names
 * are client input: only the schema's own fields count (`constructor`, `__proto__` and `toString`
 * are unknown parameters, not inherited ones), and the values are copied onto a prototype-less
 * object before yup sees them.
 */
export function validateQuery<S extends ObjectSchema<AnyObject>>(schema: S, query: Record<string, unknown>): InferType<S> {
  const names = Object.keys(query);
  const unknown = names.filter((k) => !Object.hasOwn(schema.fields, k));
  if (unknown.length) {
    throw validationError(
      `unknown query parameter(s): ${unknown.join(', ')}`,
      unknown.map((k) => ({ field: k, message: 'unknown parameter' })),
    );
  }
  const values: Record<string, unknown> = Object.create(null);
  for (const k of names) {
    const v = query[k];
    if (Array.isArray(v)) throw validationError('each query parameter may appear once', [{ field: k, message: 'repeated' }]);
    // PostgreSQL text cannot hold NUL; refused here like a NUL in a body.
    if (typeof v === 'string' && v.includes('\u0000'))
      throw validationError(`${k} must not contain NUL characters`, [{ field: k, message: 'contains a NUL character' }]);
    values[k] = v;
  }
  return validate(schema, { ...values });
}

/** A JSON object body checked against a schema (415/413/400 from the reader, 422 from the rules). */
export async function readValidBody<S extends AnySchema>(ctx: Koa.Context, schema: S, limitBytes: number): Promise<InferType<S>> {
  const raw = await readJsonBody(ctx, limitBytes);
  if (!isPlainObject(raw)) throw validationError('body must be a JSON object');
  return validate(schema, raw);
}
