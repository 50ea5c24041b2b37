import type { ValidationError } from 'yup';

export interface ErrorDetail {
  field: string;
  message: string;
}

/** An error a client caused or may see; the error middleware renders it with its status and code. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const validationError = (message: string, details?: ErrorDetail[]) => new ApiError(422, 'validation_error', message, details);
export const notFound = (what = 'resource') => new ApiError(404, 'not_found', `${what} not found`);

/** Every failed yup rule as one `validation_error`, each rule a detail. */
export function fromYup(e: ValidationError): ApiError {
  const details = (e.inner.length ? e.inner : [e]).map((x) => ({ field: x.path ?? '', message: x.message }));
  return validationError(details.map((d) => d.message).join('; '), details);
}
