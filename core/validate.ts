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
