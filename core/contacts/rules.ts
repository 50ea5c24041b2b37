import type { ContactStatus, PropertyValue, SubscriptionState } from '../../db/entities';
import { ServiceError, validationError, type ErrorDetail } from '../errors';
import { isPlainObject } from '../validate';

/** Limits of the spec's Contact and its limits table. */
export const MAX_CONTACT_NAME = 120;
export const MAX_PROPERTIES = 100;
export const MAX_PROPERTY_STRING = 1000;
/** Topics on one upsert; changes in one subscriptions call. */
export const MAX_TOPIC_CHANGES = 50;
export const CONTACT_STATUSES: readonly ContactStatus[] = ['subscribed', 'unsubscribed', 'bounced'];
export const SUBSCRIPTION_STATES: readonly SubscriptionState[] = ['subscribed', 'unsubscribed'];

/** Topic slugs (and template slugs): 1–64 of `a-z 0-9 - _`, starting with a letter or digit. */
export const SLUG_RE = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/** Property names (contacts and event data; the OpenAPI document too). */
export const PROPERTY_KEY_RE = /^[A-Za-z0-9_.-]{1,64}$/;

export const unknownTopic = (slugs: string[]) =>
  new ServiceError(
    'unknown_topic',
    `unknown topic(s): ${slugs.map((s) => JSON.stringify(s.slice(0, 80))).join(', ')}`,
    slugs.map((s) => ({ field: 'topic', message: `no topic ${JSON.stringify(s.slice(0, 80))}` })),
  );

/** A property change: values to merge and keys to remove (`null`). Null-prototype: `__proto__` is a key like any other. */
export interface PropertyPatch {
  set: Record<string, PropertyValue>;
  remove: string[];
}

/**
 * The spec's property rules on a patch (scalars only, key characters, string length, at most 100
 * keys). What the merge leaves is checked by PostgreSQL (the contacts_properties_limit constraint),
 * since only it sees the stored object at the moment of the merge.
 */
export function parseProperties(value: unknown, field = 'properties'): { patch: PropertyPatch; details: ErrorDetail[] } {
  const patch: PropertyPatch = { set: Object.create(null), remove: [] };
  const details: ErrorDetail[] = [];
  if (!isPlainObject(value)) return { patch, details: [{ field, message: `${field} must be an object` }] };
  const keys = Object.keys(value);
  for (const key of keys) {
    const at = `${field}.${key.slice(0, 80)}`;
    if (!PROPERTY_KEY_RE.test(key)) {
      details.push({ field: at, message: 'property names are 1–64 characters of A-Z a-z 0-9 _ . -' });
      continue;
    }
    const v = value[key];
    if (v === null) patch.remove.push(key);
    else if (typeof v === 'string') {
      if (v.length > MAX_PROPERTY_STRING)
        details.push({ field: at, message: `string values are at most ${MAX_PROPERTY_STRING} characters` });
      else patch.set[key] = v;
    } else if (typeof v === 'number') {
      // 1e400 parses to Infinity, which JSON would turn into null: a deletion nobody asked for.
      if (!Number.isFinite(v)) details.push({ field: at, message: 'numbers must be finite' });
      else patch.set[key] = v;
    } else if (typeof v === 'boolean') patch.set[key] = v;
    else details.push({ field: at, message: 'values must be a string, a number, a boolean or null (to delete)' });
  }
  if (Object.keys(patch.set).length > MAX_PROPERTIES)
    details.push({ field, message: `a contact holds at most ${MAX_PROPERTIES} properties` });
  return { patch, details };
}

/** The refusal of a merge that would leave more than 100 keys (the CHECK constraint's violation). */
export const tooManyProperties = () =>
  validationError(`a contact holds at most ${MAX_PROPERTIES} properties after merging`, [
    { field: 'properties', message: `more than ${MAX_PROPERTIES} keys after merging with the stored ones` },
  ]);
