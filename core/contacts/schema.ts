import * as yup from 'yup';
import type { ContactStatus, SubscriptionState } from '../../db/entities';
import { validationError, type ErrorDetail } from '../errors';
import { parseAddrSpec } from '../emails/address';
import { bodySchema, fromYup, isPlainObject } from '../validate';
import {
  CONTACT_STATUSES,
  MAX_CONTACT_NAME,
  MAX_TOPIC_CHANGES,
  SLUG_RE,
  SUBSCRIPTION_STATES,
  parseProperties,
  unknownTopic,
  type PropertyPatch,
} from './rules';

/** POST /contacts's body, beside parseProperties' rules for `properties` (also the OpenAPI document's, api/contacts/openapi.ts). */
export const upsertSchema = bodySchema({
  email: yup.string().strict().required('email is required').max(320),
  first_name: yup.string().strict().max(MAX_CONTACT_NAME).nullable(),
  last_name: yup.string().strict().max(MAX_CONTACT_NAME).nullable(),
  // Checked by parseProperties (yup would coerce or strip what the rules refuse).
  properties: yup.mixed(),
  status: yup
    .string()
    .strict()
    .oneOf(CONTACT_STATUSES, `status must be one of: ${CONTACT_STATUSES.join(', ')}`),
  topics: yup.array().strict().of(yup.string().strict().required()).max(MAX_TOPIC_CHANGES),
});

/**
 * A contact's key from a body's `email`: one bare address (no display name), lower-cased and
 * trimmed; undefined when it is not one (a non-string or an over-long value is left to the schema's
 * own message: '').
 */
export function contactEmail(value: unknown): string | undefined {
  return typeof value === 'string' && value.length <= 320 ? parseAddrSpec(value)?.normalized : '';
}

/** A contact upsert, checked: what the upsert statement writes. */
export interface ContactUpsert {
  email: string;
  firstName?: string | null;
  lastName?: string | null;
  status?: ContactStatus;
  properties: PropertyPatch;
  /** Distinct slugs, sorted (writes lock topic rows in one order). */
  topics: string[];
}

/**
 * POST /contacts's body (spec: POST /contacts): every field rule as one 422 validation_error; then
 * an invalid topic slug as 422 unknown_topic. Either way nothing has been written yet.
 */
export function parseContactUpsert(body: unknown): ContactUpsert {
  if (!isPlainObject(body)) throw validationError('body must be a JSON object');
  const details: ErrorDetail[] = [];
  try {
    upsertSchema.validateSync(body, { abortEarly: false });
  } catch (e) {
    if (!(e instanceof yup.ValidationError)) throw e;
    details.push(...(fromYup(e).details ?? []));
  }
  const props = body.properties === undefined ? { patch: { set: {}, remove: [] }, details: [] } : parseProperties(body.properties);
  details.push(...props.details);
  const email = contactEmail(body.email);
  if (email === undefined) details.push({ field: 'email', message: 'email must be one email address (local@domain)' });
  if (details.length) throw validationError(details.map((d) => d.message).join('; '), details);
  const topics = [...new Set((body.topics as string[] | undefined) ?? [])].sort();
  const invalid = topics.filter((s) => !SLUG_RE.test(s));
  if (invalid.length) throw unknownTopic(invalid);
  return {
    email: email!,
    firstName: body.first_name as string | null | undefined,
    lastName: body.last_name as string | null | undefined,
    status: body.status as ContactStatus | undefined,
    properties: props.patch,
    topics,
  };
}

export interface SubscriptionChange {
  slug: string;
  state: SubscriptionState;
}

/** One subscription change `{topic, state}` (the OpenAPI document's too). */
export const changeSchema = bodySchema({
  topic: yup.string().strict().required('topic is required'),
  state: yup
    .string()
    .strict()
    .required('state is required')
    .oneOf(SUBSCRIPTION_STATES, `state must be one of: ${SUBSCRIPTION_STATES.join(', ')}`),
});

/** Several changes `{subscriptions: [...]}` (the OpenAPI document's too). */
export const changesSchema = bodySchema({
  subscriptions: yup
    .array()
    .strict()
    .required()
    .min(1, 'subscriptions needs at least one change')
    .max(MAX_TOPIC_CHANGES, `at most ${MAX_TOPIC_CHANGES} changes per call`)
    .of(changeSchema),
});

/**
 * POST /contacts/:id/subscriptions's body: one change `{topic, state}` or `{subscriptions: [...]}`.
 * A topic named twice is refused (which of two states was meant?); a slug that cannot be a topic
 * is 422 unknown_topic here, one that could but does not exist is found by the statement.
 */
export function parseSubscriptionChanges(body: unknown): SubscriptionChange[] {
  if (!isPlainObject(body)) throw validationError('body must be a JSON object');
  let list: { topic: string; state: SubscriptionState }[];
  try {
    list = Object.hasOwn(body, 'subscriptions')
      ? changesSchema.validateSync(body, { abortEarly: false }).subscriptions
      : [changeSchema.validateSync(body, { abortEarly: false })];
  } catch (e) {
    if (e instanceof yup.ValidationError) throw fromYup(e);
    throw e;
  }
  const seen = new Set<string>();
  const twice = list.filter((c) => seen.has(c.topic) || !seen.add(c.topic)).map((c) => c.topic);
  if (twice.length)
    throw validationError(
      'each topic may appear once per call',
      twice.map((t) => ({ field: 'subscriptions', message: `topic ${JSON.stringify(t.slice(0, 80))} appears more than once` })),
    );
  const invalid = list.filter((c) => !SLUG_RE.test(c.topic)).map((c) => c.topic);
  if (invalid.length) throw unknownTopic(invalid);
  return list.map((c) => ({ slug: c.topic, state: c.state })).sort((a, b) => (a.slug < b.slug ? -1 : 1));
}
