import * as yup from 'yup';
import { ValidationError, type AnySchema, type InferType } from 'yup';
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

/** Every failed yup rule as one `validation_error`, each rule a detail. */
export function fromYup(e: ValidationError): ServiceError {
  const details = (e.inner.length ? e.inner : [e]).map((x) => ({ field: x.path ?? '', message: x.message }));
  return validationError(details.map((d) => d.message).join('; '), details);
}

/** Every failed rule as one 422 `validation_error`, each rule a detail. */
export function validate<S extends AnySchema>(schema: S, value: unknown): InferType<S> {
  try {
    return schema.validateSync(value, { abortEarly: false });
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
