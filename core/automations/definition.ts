import * as yup from 'yup';
import { validationError } from '../errors';
import { isPlainObject, NO_LINE_BREAKS } from '../validate';
import { check, ownFields, parsedApart, Problems, required, slug, strictObject, text } from './checks';
import { MAX_AUTOMATION_NAME, MAX_DETAILS, MAX_EVENT_NAME } from './limits';
import { parseList } from './step-tree';
import type { Context } from './steps';

/**
 * The definition of an automation (`POST /api/v1/automations`, `PUT /api/v1/automations/:id`):
 * `{name, enabled?, trigger, steps}`, checked without the database. What only the database can
 * tell (do the templates and topics exist?) is returned as `templates` and `topics`, each with the
 * field path to name in a refusal.
 *
 * Here: the types, the body and its trigger. Each step's fields are in core/automations/steps.ts,
 * the lists of steps (nesting, count, paths) in core/automations/step-tree.ts, the yup checks
 * they share in core/automations/checks.ts, the limits in core/automations/limits.ts.
 */

export type AutomationTrigger =
  { type: 'event'; event: string } | { type: 'contact.created' } | { type: 'topic.subscribed'; topic: string };

export type AutomationCondition =
  | { property: string; equals: string | number | boolean | null }
  | { property: string; exists: boolean }
  | { topic: string; state: 'subscribed' | 'unsubscribed' }
  | { status: 'subscribed' | 'unsubscribed' | 'bounced' };

export interface AutomationTemplateRef {
  id: string | null;
  slug: string | null;
  version: number | null;
}

export type AutomationStep =
  | { type: 'delay'; duration: string | number; seconds: number }
  | { type: 'send_email'; from: string; template: AutomationTemplateRef; kind: string | null; tags: { name: string; value: string }[] }
  | { type: 'wait_for_event'; event: string; timeout: string | number; timeout_seconds: number }
  | { type: 'condition'; if: AutomationCondition; then: AutomationStep[]; else: AutomationStep[] }
  | {
      type: 'update_contact';
      /** `set` is a null-prototype object (as parseProperties makes it): `__proto__` is a property name like any other. */
      properties: { set: Record<string, string | number | boolean>; remove: string[] } | null;
      topics: { topic: string; state: 'subscribed' | 'unsubscribed' }[];
    };

export interface AutomationDefinition {
  trigger: AutomationTrigger;
  steps: AutomationStep[];
}

export interface ParsedAutomation {
  name: string;
  /** Undefined when omitted (create defaults to true; PUT keeps the current value). */
  enabled: boolean | undefined;
  definition: AutomationDefinition;
  /** Every template a send step names, with the step path of its `template` field, e.g. `steps[2].then[0].template`. */
  templates: { path: string; ref: AutomationTemplateRef }[];
  /** Every topic slug named (trigger, conditions, update_contact), with its field path (`trigger.topic_subscribed`, `steps[1].if.topic`, `steps[3].topics[0].topic`). */
  topics: { path: string; slug: string }[];
}

// Where they live, under the names importers know.
export { MAX_AUTOMATION_DEPTH, MAX_AUTOMATION_NAME, MAX_AUTOMATION_STEPS, MAX_CONDITION_PROPERTY, MAX_EVENT_NAME } from './limits';
export { stepAt } from './step-tree';

const TRIGGER_SHAPES = 'must be exactly one of {event: "<name>"}, {contact_created: true}, {topic_subscribed: "<topic slug>"}';

const automationSchema = strictObject({
  name: text(MAX_AUTOMATION_NAME).defined(required).matches(NO_LINE_BREAKS, '${path} must not contain line breaks'),
  enabled: yup.boolean().strict().typeError('${path} must be a boolean'),
  // Parsed below: the trigger by triggerSchema, the steps by core/automations/step-tree.ts.
  trigger: parsedApart(),
  steps: parsedApart(),
});

const triggerSchema = strictObject({
  event: text(MAX_EVENT_NAME),
  contact_created: yup.mixed().oneOf([true], '${path} must be true'),
  topic_subscribed: slug(),
})
  .test('one', `\${path} ${TRIGGER_SHAPES}`, (v) => v == null || Object.values(v).filter((x) => x !== undefined).length === 1)
  .typeError(`\${path} ${TRIGGER_SHAPES}`)
  .nonNullable(`\${path} ${TRIGGER_SHAPES}`)
  .defined(`\${path} is required: it ${TRIGGER_SHAPES}`);

function parseTrigger(v: unknown, ctx: Context): AutomationTrigger | null {
  const trigger = isPlainObject(v) ? ownFields(v) : v;
  if (!check(triggerSchema, trigger, 'trigger', ctx.p)) return null;
  const { event, topic_subscribed: topic } = trigger as Record<string, unknown>;
  if (typeof event === 'string') return { type: 'event', event };
  if (typeof topic !== 'string') return { type: 'contact.created' };
  ctx.topics.push({ path: 'trigger.topic_subscribed', slug: topic });
  return { type: 'topic.subscribed', topic };
}

/** A detail as one line of the refusal's message (yup's messages name their field, the template's and properties' do not). */
const line = (d: { field: string; message: string }) => (d.field && !d.message.startsWith(d.field) ? `${d.field} ${d.message}` : d.message);

/**
 * Checks an automation body and returns it normalized: fresh objects holding only the known
 * fields, durations in seconds beside what was given, topic changes as objects. Every problem is a
 * detail of one 422 `validation_error` (at most 50 listed).
 */
export function parseAutomation(body: unknown): ParsedAutomation {
  if (!isPlainObject(body)) {
    throw validationError('the body must be an object {name, enabled?, trigger, steps}', [{ field: '', message: 'must be an object' }]);
  }
  const p = new Problems();
  const ctx: Context = { p, steps: 0, tooMany: false, templates: [], topics: [] };
  const fields = ownFields(body);
  check(automationSchema, fields, '', p);
  const trigger = parseTrigger(fields.trigger, ctx);
  const steps = parseList(fields.steps, 'steps', 1, ctx, false);

  if (p.count || trigger === null || steps === null) {
    const details = p.more ? [...p.details, { field: '', message: `problems past the first ${MAX_DETAILS} are not listed` }] : p.details;
    const message = `invalid automation: ${details.map(line).join('; ')}`;
    throw validationError(message.length > 2000 ? `${message.slice(0, 1997)}...` : message, details);
  }
  return {
    name: fields.name as string,
    enabled: fields.enabled as boolean | undefined,
    definition: { trigger, steps },
    templates: ctx.templates,
    topics: ctx.topics,
  };
}
