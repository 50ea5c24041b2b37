import { isUuid } from '../../db/ids';
import { SLUG_RE } from '../contacts/rules';
import { validationError, type ErrorDetail } from '../errors';
import { isPlainObject } from '../validate';
import type { TemplateRef } from './resolver';

/** The largest version number a template can have: versions are stored as PostgreSQL integers. */
export const MAX_TEMPLATE_VERSION = 2_147_483_647;

/** A published version's number: a whole number from 1 to MAX_TEMPLATE_VERSION. */
export const isVersionNumber = (v: unknown): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 1 && v <= MAX_TEMPLATE_VERSION;

/** A send's `template` object, checked: what to resolve and the caller's data. */
export interface TemplateRequest {
  ref: TemplateRef;
  /** The ref cannot name any template (an id that is no UUID, a slug outside the slug rule): 422 `template_not_found` without a lookup. */
  unresolvable: boolean;
  data: Record<string, unknown>;
}

const FIELDS = new Set(['id', 'slug', 'version', 'data']);

/**
 * The spec's template object: `id` or `slug` (exactly one), `version` a published number or
 * `latest` (omitted = latest), `data` an object. Shapes are 422 `validation_error`; a well-formed
 * name that cannot exist is left to resolve as `template_not_found`, like one that does not.
 */
export function parseTemplateRequest(value: unknown, field = 'template'): TemplateRequest {
  if (!isPlainObject(value))
    throw validationError(`${field} must be an object {id or slug, version?, data?}`, [{ field, message: 'must be an object' }]);
  const details: ErrorDetail[] = [];
  const unknown = Object.keys(value).filter((k) => !FIELDS.has(k));
  if (unknown.length) details.push({ field, message: `unknown field(s): ${unknown.join(', ').slice(0, 200)}` });
  const { id, slug, version, data } = value;
  if ((id === undefined) === (slug === undefined)) details.push({ field, message: 'name the template by exactly one of id and slug' });
  if (id !== undefined && (typeof id !== 'string' || id.length > 64))
    details.push({ field: `${field}.id`, message: 'must be a template id' });
  if (slug !== undefined && (typeof slug !== 'string' || slug.length > 64))
    details.push({ field: `${field}.slug`, message: 'must be a template slug' });
  if (version !== undefined && version !== 'latest' && !isVersionNumber(version)) {
    details.push({ field: `${field}.version`, message: 'must be a published version number (1, 2, …) or "latest"' });
  }
  if (data !== undefined && !isPlainObject(data)) details.push({ field: `${field}.data`, message: 'must be an object' });
  if (details.length) throw validationError(`invalid ${field}: ${details.map((d) => `${d.field} ${d.message}`).join('; ')}`, details);

  const ref: TemplateRef = {
    id: typeof id === 'string' ? id.toLowerCase() : null,
    slug: typeof slug === 'string' ? slug : null,
    version: typeof version === 'number' ? version : null,
  };
  return {
    ref,
    unresolvable: ref.id !== null ? !isUuid(ref.id) : !SLUG_RE.test(ref.slug!),
    data: (data as Record<string, unknown> | undefined) ?? {},
  };
}
