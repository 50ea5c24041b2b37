import * as yup from 'yup';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Topic, type SegmentFilter, type ContactStatus, type SubscriptionState } from '../../db/entities';
import type { AudienceCondition } from '../../db/sql/audience-conditions';
import { validationError } from '../errors';
import { bodySchema, fromYup, isPlainObject } from '../validate';
import { unknownTopic } from '../contacts/rules';

export const MAX_CONDITIONS = 20;
const STATUSES = ['SUBSCRIBED', 'UNSUBSCRIBED', 'BOUNCED'] as const;
const STATES = ['SUBSCRIBED', 'UNSUBSCRIBED'] as const;

/** A condition on the contact status (the OpenAPI document's too, api/segments/openapi.ts). */
export const statusCondition = bodySchema({
  status: yup
    .string()
    .strict()
    .required()
    .oneOf(STATUSES, `status must be one of: ${STATUSES.join(', ')}`),
});
/** A condition on a topic's effective state (the OpenAPI document's too). */
export const topicCondition = bodySchema({
  topic: yup.string().strict().required().max(200),
  state: yup
    .string()
    .strict()
    .required('state is required with topic')
    .oneOf(STATES, `state must be one of: ${STATES.join(', ')}`),
});

/**
 * A segment's filter (spec: Segment): `{all: [condition, ...]}` with 1–20 conditions, each
 * `{status}` or `{topic, state}`, upper-case values. Anything else is 422 validation_error.
 */
export function parseSegmentFilter(value: unknown, field = 'filter'): SegmentFilter {
  if (!isPlainObject(value) || Object.keys(value).length !== 1 || !Array.isArray(value.all))
    throw validationError(`${field} must be an object {all: [condition, ...]}`, [{ field, message: 'expected {all: [...]}' }]);
  const all = value.all;
  if (all.length < 1 || all.length > MAX_CONDITIONS)
    throw validationError(`${field}.all holds 1 to ${MAX_CONDITIONS} conditions`, [{ field: `${field}.all`, message: 'wrong length' }]);
  return {
    all: all.map((c, i) => {
      const at = `${field}.all[${i}]`;
      if (!isPlainObject(c)) throw validationError(`${at} must be an object`, [{ field: at, message: 'not an object' }]);
      const schema = Object.hasOwn(c, 'topic') ? topicCondition : statusCondition;
      try {
        const v = schema.validateSync(c, { abortEarly: false });
        return 'topic' in v ? { topic: v.topic, state: v.state } : { status: v.status };
      } catch (e) {
        if (!(e instanceof yup.ValidationError)) throw e;
        const err = fromYup(e);
        throw validationError(
          `${at}: ${err.message}`,
          err.details?.map((d) => ({ field: `${at}.${d.field}`, message: d.message })),
        );
      }
    }),
  };
}

/**
 * Conditions with their topics resolved in the organization. `strict` (a filter being saved or
 * given): an unknown slug is 422 unknown_topic. Otherwise (a saved segment whose topic was deleted
 * since): that condition matches nobody.
 */
export async function resolveConditions(
  em: EntityManager,
  organizationId: string,
  conditions: ({ status: string } | { topic: string; state: string })[],
  strict: boolean,
): Promise<AudienceCondition[]> {
  const slugs = [...new Set(conditions.flatMap((c) => ('topic' in c ? [c.topic] : [])))];
  const topics = slugs.length ? await em.find(Topic, { organizationId, slug: { $in: slugs } }) : [];
  const bySlug = new Map(topics.map((t) => [t.slug, t]));
  const missing = slugs.filter((s) => !bySlug.has(s));
  if (strict && missing.length) throw unknownTopic(missing);
  return conditions.map((c) => {
    if (!('topic' in c)) return { status: c.status.toLowerCase() as ContactStatus };
    const t = bySlug.get(c.topic);
    return { topicId: t?.id ?? null, defaultOptIn: t?.defaultOptIn ?? false, state: c.state.toLowerCase() as SubscriptionState };
  });
}
