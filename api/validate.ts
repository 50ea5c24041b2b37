import type Koa from 'koa';
import { ValidationError, type AnySchema, type AnyObject, type InferType, type ObjectSchema } from 'yup';
import { fromYup, validationError } from './errors';
import { readJsonBody } from './middleware/json-body';
import { isPlainObject } from './emails/schema';

/** Every failed rule as one 422 `validation_error`, each rule a detail. */
export function validate<S extends AnySchema>(schema: S, value: unknown): InferType<S> {
  try {
    return schema.validateSync(value, { abortEarly: false });
  } catch (err) {
    if (err instanceof ValidationError) throw fromYup(err);
    throw err;
  }
}

/**
 * Query parameters against an object schema. yup's noUnknown strips rather than rejects when it
 * coerces (limit arrives as a string), so unknown and repeated parameters are refused here.
 */
export function validateQuery<S extends ObjectSchema<AnyObject>>(schema: S, query: Record<string, unknown>): InferType<S> {
  const unknown = Object.keys(query).filter((k) => !(k in schema.fields));
  if (unknown.length)
    throw validationError(
      `unknown query parameter(s): ${unknown.join(', ')}`,
      unknown.map((k) => ({ field: k, message: 'unknown parameter' })),
    );
  if (Object.values(query).some((v) => Array.isArray(v))) throw validationError('each query parameter may appear once');
  return validate(schema, { ...query });
}

/** A JSON object body checked against a schema (415/413/400 from the reader, 422 from the rules). */
export async function readValidBody<S extends AnySchema>(ctx: Koa.Context, schema: S, limitBytes: number): Promise<InferType<S>> {
  const raw = await readJsonBody(ctx, limitBytes);
  if (!isPlainObject(raw)) throw validationError('body must be a JSON object');
  return validate(schema, raw);
}
