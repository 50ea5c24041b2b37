import * as yup from 'yup';
import { CONTACT_STATUSES, MAX_PROPERTY_STRING, MAX_TOPIC_CHANGES, parseProperties, SUBSCRIPTION_STATES } from '../contacts/rules';
import { address, kindField, sendEmailSchema, tagSchema } from '../emails/schema';
import { ServiceError } from '../errors';
import { parseTemplateRequest } from '../templates/request';
import { isPlainObject } from '../validate';
import {
  check,
  noNul,
  parsedApart,
  oneOf,
  ownFields,
  required,
  slug,
  SLUG_RULE,
  strictObject,
  string,
  text,
  type Problems,
} from './checks';
import type { AutomationCondition, AutomationStep, AutomationTemplateRef, ParsedAutomation } from './definition';
import { MAX_DURATION_SECONDS, parseDuration } from './duration';
import { MAX_CONDITION_PROPERTY, MAX_EVENT_NAME } from './limits';

/**
 * One step of an automation, checked and normalized (core/automations/definition.ts has its
 * types): a yup schema per step type for its fields, then what the schema leaves apart (the
 * template, a condition and its lists, properties, tags, topics). The rules of the same fields
 * elsewhere are used as they are: the send's `from`, `kind` and `tags` (core/emails/schema.ts),
 * the template object (core/templates/request.ts), contact properties and topics
 * (core/contacts/rules.ts).
 */

export interface Context {
  p: Problems;
  /** Steps counted so far (core/automations/step-tree.ts); `tooMany` once past the limit. */
  steps: number;
  tooMany: boolean;
  templates: ParsedAutomation['templates'];
  topics: ParsedAutomation['topics'];
}

/** Parses a condition's `then` or `else` list at `path` (one list deeper); null when refused. */
export type Branch = (v: unknown, path: string) => AutomationStep[] | null;

type TopicChange = { topic: string; state: 'subscribed' | 'unsubscribed' };

/** Whole seconds or an ISO 8601 duration (core/automations/duration.ts), `min` seconds to 365 days. */
const duration = (min: number) =>
  yup.mixed<string | number>().test('duration', function (v) {
    if (v === undefined) return this.createError({ message: required });
    const seconds = parseDuration(v);
    if (seconds === null)
      return this.createError({
        message: '${path} must be a whole number of seconds or an ISO 8601 duration such as PT30M, P1D, P2W or P1DT2H (no years or months)',
      });
    if (seconds < min || seconds > MAX_DURATION_SECONDS)
      return this.createError({
        message: `\${path} must be ${min === 0 ? 'at most' : `${min} second(s) to`} ${MAX_DURATION_SECONDS} seconds (365 days)`,
      });
    return true;
  });

/** The send's tag rules as they are (core/emails/schema.ts), with messages that do not print the value, and no NUL. */
const tagFields = tagSchema.fields as { name: yup.StringSchema; value: yup.StringSchema };
const sendTags = sendEmailSchema.fields.tags as yup.ArraySchema<{ name: string; value: string }[] | undefined, yup.AnyObject>;
const tags = sendTags.typeError('${path} must be an array of {name, value}').of(
  tagSchema
    .shape({
      name: tagFields.name.typeError('${path} must be a string').test(noNul),
      value: tagFields.value.typeError('${path} must be a string').test(noNul),
    })
    .typeError('${path} must be an object {name, value}'),
);

/** An update_contact step's `topics`: slugs (meaning subscribed) or `{topic, state}`, each topic once (checked after). */
const topicSlug = slug();
const topicChange = strictObject({ topic: slug().defined(required), state: oneOf(SUBSCRIPTION_STATES) }).typeError(
  '${path} must be a topic slug or {topic, state}',
);
const topicChanges = yup
  .array()
  .strict()
  .typeError('${path} must be an array of topic slugs or {topic, state}')
  .max(MAX_TOPIC_CHANGES, `\${path} holds at most ${MAX_TOPIC_CHANGES} topic changes`)
  .of(yup.lazy((x) => (typeof x === 'string' ? topicSlug : topicChange)));

const STEP_TYPES = ['delay', 'send_email', 'wait_for_event', 'condition', 'update_contact'] as const;
type StepType = (typeof STEP_TYPES)[number];
const stepType = oneOf(STEP_TYPES);

/** Each type's fields (`type` is checked first, the fields left `parsedApart` after). */
const STEP_SCHEMAS: Record<StepType, yup.AnyObjectSchema> = {
  delay: strictObject({ type: parsedApart(), duration: duration(0) }),
  send_email: strictObject({
    type: parsedApart(),
    from: address().typeError('${path} must be a string').defined(required),
    template: parsedApart(),
    kind: kindField().typeError('${path} must be a string'),
    tags: parsedApart(),
  }),
  wait_for_event: strictObject({ type: parsedApart(), event: text(MAX_EVENT_NAME).defined(required), timeout: duration(1) }),
  condition: strictObject({ type: parsedApart(), if: parsedApart(), then: parsedApart(), else: parsedApart() }),
  update_contact: strictObject({ type: parsedApart(), properties: parsedApart(), topics: parsedApart() }).test(
    'something',
    '${path} must name properties, topics or both',
    (v) => v == null || v.properties !== undefined || v.topics !== undefined,
  ),
};

/** A condition's `equals`: a value a contact property can hold (core/contacts/rules.ts), or null for "absent". */
const propertyValue = yup
  .mixed()
  .nullable()
  .test('scalar', function (v) {
    const fail = (why: string) => this.createError({ message: `\${path} ${why}` });
    if (typeof v === 'string') {
      if (v.length > MAX_PROPERTY_STRING) return fail(`strings are at most ${MAX_PROPERTY_STRING} characters`);
      return !v.includes('\u0000') || fail('contains a NUL character');
    }
    if (typeof v === 'number') return Number.isFinite(v) || fail('numbers must be finite');
    return typeof v === 'boolean' || v === null || fail('must be a string, a number, a boolean or null');
  });

const CONDITION_SHAPES = 'must be exactly one of {property, equals}, {property, exists}, {topic, state}, {status}';
/** The condition shapes by their fields, sorted. */
const CONDITIONS = new Map<string, yup.AnyObjectSchema>([
  ['equals,property', strictObject({ property: text(MAX_CONDITION_PROPERTY).defined(required), equals: propertyValue })],
  [
    'exists,property',
    strictObject({
      property: text(MAX_CONDITION_PROPERTY).defined(required),
      exists: yup.boolean().strict().typeError('${path} must be a boolean').defined('${path} must be a boolean'),
    }),
  ],
  ['state,topic', strictObject({ topic: slug().defined(required), state: oneOf(SUBSCRIPTION_STATES) })],
  ['status', strictObject({ status: oneOf(CONTACT_STATUSES) })],
]);

function parseCondition(v: unknown, field: string, ctx: Context): AutomationCondition | null {
  const keys = isPlainObject(v) ? Object.keys(v) : [];
  const schema = keys.length <= 2 ? CONDITIONS.get(keys.sort().join(',')) : undefined;
  if (!isPlainObject(v) || !schema) {
    ctx.p.add(field, v === undefined ? `${field} is required: it ${CONDITION_SHAPES}` : `${field} ${CONDITION_SHAPES}`);
    return null;
  }
  const c = ownFields(v);
  if (!check(schema, c, field, ctx.p)) return null;
  if (c.status !== undefined) return { status: c.status as 'subscribed' | 'unsubscribed' | 'bounced' };
  if (c.topic !== undefined) {
    ctx.topics.push({ path: `${field}.topic`, slug: c.topic as string });
    return { topic: c.topic as string, state: c.state as 'subscribed' | 'unsubscribed' };
  }
  const property = c.property as string;
  return 'exists' in c ? { property, exists: c.exists as boolean } : { property, equals: c.equals as string | number | boolean | null };
}

function parseTemplate(v: unknown, field: string, ctx: Context): AutomationTemplateRef | null {
  const { p } = ctx;
  let ok = true;
  // Template data come from the contact and the triggering event, never from the definition.
  if (isPlainObject(v) && Object.hasOwn(v, 'data')) {
    p.add(`${field}.data`, `${field}.data is not allowed in an automation: template data come from the contact and the event`);
    ok = false;
  }
  let request;
  try {
    request = parseTemplateRequest(v, field);
  } catch (err) {
    if (!(err instanceof ServiceError)) throw err;
    for (const d of err.details ?? []) if (d.field !== `${field}.data`) p.add(d.field, d.message);
    return null;
  }
  if (request.unresolvable) {
    p.add(field, request.ref.id !== null ? `${field}.id must be a template id (a UUID)` : `${field}.slug ${SLUG_RULE}`);
    return null;
  }
  if (!ok) return null;
  const ref = { id: request.ref.id, slug: request.ref.slug, version: request.ref.version };
  ctx.templates.push({ path: field, ref: { ...ref } });
  return ref;
}

/** An array checked shallow first: one over its length limit is refused without walking its items. */
function checkList(schema: yup.AnySchema, v: unknown, field: string, p: Problems): unknown[] | null {
  if (!check(schema, v, field, p, true)) return null;
  const list = (v as unknown[]).map((x) => (isPlainObject(x) ? ownFields(x) : x));
  return check(schema, list, field, p) ? list : null;
}

function parseTopicChanges(v: unknown, field: string, ctx: Context): TopicChange[] | null {
  const list = checkList(topicChanges, v, field, ctx.p) as (string | TopicChange)[] | null;
  if (list === null) return null;
  const out = list.map((x) => (typeof x === 'string' ? { topic: x, state: 'subscribed' as const } : { topic: x.topic, state: x.state }));
  const paths = list.map((x, i) => (typeof x === 'string' ? `${field}[${i}]` : `${field}[${i}].topic`));
  const seen = new Set<string>();
  const before = ctx.p.count;
  out.forEach((c, i) => {
    if (seen.has(c.topic)) ctx.p.add(paths[i], `${paths[i]} names topic ${c.topic} a second time`);
    seen.add(c.topic);
  });
  if (ctx.p.count !== before) return null;
  ctx.topics.push(...out.map((c, i) => ({ path: paths[i], slug: c.topic })));
  return out;
}

/** The step at `path`, normalized: fresh objects of the known fields only; null when refused (details added). */
export function parseStep(v: unknown, path: string, ctx: Context, branch: Branch): AutomationStep | null {
  const { p } = ctx;
  if (!isPlainObject(v)) {
    p.add(path, `${path} must be an object with a type`);
    return null;
  }
  const step = ownFields(v);
  if (!check(stepType, step.type, `${path}.type`, p)) return null;
  const type = step.type as StepType;
  const before = p.count;
  check(STEP_SCHEMAS[type], step, path, p);
  const clean = () => p.count === before;
  switch (type) {
    case 'delay': {
      const d = step.duration as string | number;
      return clean() ? { type: 'delay', duration: d, seconds: parseDuration(d)! } : null;
    }
    case 'wait_for_event': {
      const t = step.timeout as string | number;
      return clean() ? { type: 'wait_for_event', event: step.event as string, timeout: t, timeout_seconds: parseDuration(t)! } : null;
    }
    case 'send_email': {
      const template = parseTemplate(step.template, `${path}.template`, ctx);
      const list = step.tags === undefined ? [] : (checkList(tags, step.tags, `${path}.tags`, p) as Record<string, string>[] | null);
      if (template === null || list === null || !clean()) return null;
      const kind = (step.kind as string | undefined) ?? null;
      return { type: 'send_email', from: step.from as string, template, kind, tags: list.map((t) => ({ name: t.name, value: t.value })) };
    }
    case 'condition': {
      const cond = parseCondition(step.if, `${path}.if`, ctx);
      const thenList = branch(step.then, `${path}.then`);
      const elseList = step.else === undefined ? [] : branch(step.else, `${path}.else`);
      if (cond === null || thenList === null || elseList === null || !clean()) return null;
      return { type: 'condition', if: cond, then: thenList, else: elseList };
    }
    case 'update_contact': {
      let properties: { set: Record<string, string | number | boolean>; remove: string[] } | null = null;
      if (step.properties !== undefined) {
        const field = `${path}.properties`;
        const { patch, details } = parseProperties(step.properties, field);
        for (const d of details) p.add(d.field, d.message);
        for (const [key, x] of Object.entries(patch.set))
          if (!noNul.test(x)) p.add(`${field}.${key}`, `${field}.${key} contains a NUL character`);
        properties = { set: patch.set, remove: [...patch.remove] };
      }
      const changes = step.topics === undefined ? [] : parseTopicChanges(step.topics, `${path}.topics`, ctx);
      if (changes === null || !clean()) return null;
      return { type: 'update_contact', properties, topics: changes };
    }
  }
}
