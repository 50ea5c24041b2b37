import * as yup from 'yup';
import { ValidationError, type AnySchema } from 'yup';
import { SLUG_RE } from '../contacts/rules';
import type { ErrorDetail } from '../errors';
import { bodySchema, fromYup } from '../validate';
import { MAX_DETAILS } from './limits';

/**
 * How an automation definition is checked: one node of its tree at a time (the body, the trigger,
 * a step, a condition, a list) against a yup schema of core/validate.ts's kind (exact fields, no
 * coercion), each failed rule a detail at its field path, and the walk goes on after a refusal so
 * that every problem is listed (at most MAX_DETAILS). The tree itself (nesting, step count) is
 * walked by hand (core/automations/step-tree.ts): a schema would walk what the limits refuse.
 *
 * Messages never print the value: a hostile one may be megabytes long or nested thousands deep.
 */

export class Problems {
  readonly details: ErrorDetail[] = [];
  /** Problems found, listed or not: a parser compares it before and after to know whether it added one. */
  count = 0;
  more = false;
  add(field: string, message: string) {
    this.count++;
    if (this.details.length < MAX_DETAILS) this.details.push({ field, message });
    else this.more = true;
  }
  get full() {
    return this.details.length >= MAX_DETAILS;
  }
}

/**
 * Checks `value` at `path` with every rule of `schema`, a detail per failed rule: the node's own
 * problems (unknown fields, its shape) before its fields' (yup lists them last). False when one
 * failed. `shallow`: the node's own rules only, such as an array's length before its items are walked.
 */
export function check(schema: AnySchema, value: unknown, path: string, p: Problems, shallow = false): boolean {
  try {
    // `path` is the option yup itself validates a nested field with: messages and details name the whole path.
    schema.validateSync(value, { abortEarly: false, recursive: !shallow, path } as yup.ValidateOptions);
    return true;
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    const details = fromYup(err).details ?? [];
    for (const d of details) if (d.field === path) p.add(d.field, d.message);
    for (const d of details) if (d.field !== path) p.add(d.field, d.message);
    return false;
  }
}

/**
 * `o`'s own fields in a null-prototype copy: yup reads inherited ones too (a `duration` on a
 * prototype is no field the client sent), and `__proto__` stays a key like any other.
 */
export function ownFields(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = Object.create(null);
  for (const k of Object.keys(o)) out[k] = o[k];
  return out;
}

/** core/validate.ts's bodySchema, naming unknown fields in at most 200 characters, control characters as `?`. */
export const strictObject = <T extends yup.ObjectShape>(shape: T) =>
  bodySchema(shape).noUnknown(
    ({ unknown }) =>
      `unknown field(s): ${String(unknown)
        .slice(0, 200)
        .replace(/[\u0000-\u001f\u007f]/g, '?')}`,
  );

export const string = () => yup.string().strict().typeError('${path} must be a string');

/** PostgreSQL text cannot hold NUL. */
export const noNul = {
  name: 'nul',
  message: '${path} contains a NUL character',
  test: (v: unknown) => typeof v !== 'string' || !v.includes('\u0000'),
};

/** 1 to `max` characters, no NUL. */
export const text = (max: number) => string().min(1).max(max).test(noNul);

export const SLUG_RULE = 'must be a slug: 1–64 of a-z 0-9 - _, starting with a letter or digit';
/** A topic slug (core/contacts/rules.ts). */
export const slug = () => string().matches(SLUG_RE, `\${path} ${SLUG_RULE}`);

/** One of `values`, required. */
export const oneOf = <T extends string>(values: readonly T[]) => {
  const message = `\${path} must be one of ${values.join(', ')}`;
  return yup.mixed<T>().defined(message).oneOf(values, message);
};

export const required = '${path} is required';

/** A field the schema admits as it is: it is checked apart (a step's type before the schema, its template, lists and properties after). */
export const parsedApart = () => yup.mixed().nullable();
