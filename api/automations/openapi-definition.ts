import type { JsonSchema } from '../openapi/operation';
import { ref } from '../openapi/common';
import { CONTACT_STATUSES, MAX_PROPERTY_STRING, MAX_TOPIC_CHANGES, SUBSCRIPTION_STATES } from '../../core/contacts/rules';
import { MAX_DURATION_SECONDS } from '../../core/automations/duration';
import { MAX_AUTOMATION_NAME, MAX_AUTOMATION_STEPS, MAX_CONDITION_PROPERTY, MAX_EVENT_NAME } from '../../core/automations/limits';

/**
 * The automation definition as a request body (POST /automations, PUT /automations/{id}).
 *
 * The routes check it with core/automations/definition.ts's parseAutomation, not with one yup
 * schema: the steps nest (a condition holds lists of steps), the tree is walked by hand with its
 * limits (100 steps in all, 5 lists deep) checked before it is walked, and each node is checked by
 * its own small yup schema picked by its `type` or its fields. The converter cannot take that, so
 * the operations describe the body as `{ json: ... }` with the JSON Schema below: faithful to
 * parseAutomation, and never stricter than it (a body it accepts validates here). What JSON Schema
 * cannot say, or says only loosely, is left to the route: the total step count and the nesting
 * depth, durations' 365-day bound for ISO strings, topics named twice in one update_contact, NUL
 * characters, the 100-property limit of `properties`, and the templates' and topics' existence
 * (all 422 `validation_error`, each detail naming its field path).
 *
 * `AutomationTrigger` and `AutomationCondition` are also how the automation object answers them.
 */

const SLUG = '^[a-z0-9][a-z0-9_-]{0,63}$';
const ONE_LINE = '^[^\\r\\n]*$';
const obj = (properties: Record<string, JsonSchema>, required: string[], extra: JsonSchema = {}): JsonSchema => ({
  type: 'object',
  properties,
  ...(required.length ? { required } : {}),
  additionalProperties: false,
  ...extra,
});

const slug: JsonSchema = { type: 'string', pattern: SLUG, description: 'A topic slug.' };
const eventName: JsonSchema = { type: 'string', minLength: 1, maxLength: MAX_EVENT_NAME };
const property: JsonSchema = { type: 'string', minLength: 1, maxLength: MAX_CONDITION_PROPERTY };
/** core/automations/duration.ts: whole seconds, or `PnW` / `P[nD][T[nH][nM][nS]]` (the 365-day bound of a string is checked by the route). */
const duration = (min: number): JsonSchema => ({
  oneOf: [
    { type: 'integer', minimum: min, maximum: MAX_DURATION_SECONDS },
    {
      type: 'string',
      maxLength: 100,
      pattern: '^P(?:[0-9]{1,15}W|(?:[0-9]{1,15}D)?(?:T(?:[0-9]{1,15}H)?(?:[0-9]{1,15}M)?(?:[0-9]{1,15}S)?)?)$',
    },
  ],
  description: `Whole seconds, or an ISO 8601 duration such as PT30M, P1D, P2W, P1DT2H (no years or months); ${min} second(s) to 365 days.`,
});
const type = (name: string): JsonSchema => ({ const: name });
const steps = (min: number): JsonSchema => ({
  type: 'array',
  minItems: min,
  maxItems: MAX_AUTOMATION_STEPS,
  items: ref('AutomationStepInput'),
});

export const definitionSchemas: Record<string, JsonSchema> = {
  AutomationInput: obj(
    {
      name: { type: 'string', minLength: 1, maxLength: MAX_AUTOMATION_NAME, pattern: ONE_LINE },
      enabled: { type: 'boolean', description: 'Create: default true. PUT: omitted keeps the current value.' },
      trigger: ref('AutomationTrigger'),
      steps: {
        ...steps(1),
        description: `1–${MAX_AUTOMATION_STEPS} steps in all (nested ones included), conditions nested at most 5 lists deep.`,
      },
    },
    ['name', 'trigger', 'steps'],
    { description: 'An automation definition (core/automations/definition.ts).' },
  ),
  AutomationTrigger: {
    description: 'Exactly one of: an event name (POST /events `name`), a new contact, a subscription to a topic (the topic must exist).',
    oneOf: [
      obj({ event: eventName }, ['event']),
      obj({ contact_created: { const: true } }, ['contact_created']),
      obj({ topic_subscribed: slug }, ['topic_subscribed']),
    ],
  },
  AutomationCondition: {
    description: 'Evaluated on the contact when the step runs. `equals: null` means "absent"; a topic state is the effective one.',
    oneOf: [
      obj(
        {
          property,
          equals: {
            anyOf: [{ type: 'string', maxLength: MAX_PROPERTY_STRING }, { type: 'number' }, { type: 'boolean' }, { type: 'null' }],
          },
        },
        ['property', 'equals'],
      ),
      obj({ property, exists: { type: 'boolean' } }, ['property', 'exists']),
      obj({ topic: slug, state: { type: 'string', enum: [...SUBSCRIPTION_STATES] } }, ['topic', 'state']),
      obj({ status: { type: 'string', enum: [...CONTACT_STATUSES] } }, ['status']),
    ],
  },
  AutomationTemplateInput: obj(
    {
      id: { type: 'string', format: 'uuid' },
      slug: { type: 'string', pattern: SLUG },
      version: {
        oneOf: [{ type: 'integer', minimum: 1 }, { const: 'latest' }],
        description: 'Omitted or `latest`: the latest published version when the step runs.',
      },
    },
    [],
    {
      description: 'A published template, by exactly one of `id` and `slug`; no `data` (it comes from the contact and the event).',
      oneOf: [{ required: ['id'] }, { required: ['slug'] }],
    },
  ),
  AutomationStepInput: {
    oneOf: [
      obj({ type: type('delay'), duration: duration(0) }, ['type', 'duration']),
      obj(
        {
          type: type('send_email'),
          from: { type: 'string', description: 'An address or `Name <address>` of a verified domain.' },
          template: ref('AutomationTemplateInput'),
          kind: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.:-]+$' },
          tags: {
            type: 'array',
            maxItems: 20,
            items: obj(
              {
                name: { type: 'string', minLength: 1, maxLength: 64, pattern: ONE_LINE },
                value: { type: 'string', maxLength: 256, pattern: ONE_LINE },
              },
              ['name', 'value'],
            ),
          },
        },
        ['type', 'from', 'template'],
      ),
      obj({ type: type('wait_for_event'), event: eventName, timeout: duration(1) }, ['type', 'event', 'timeout']),
      obj({ type: type('condition'), if: ref('AutomationCondition'), then: steps(0), else: steps(0) }, ['type', 'if', 'then']),
      obj(
        {
          type: type('update_contact'),
          properties: {
            type: 'object',
            description: 'Merged as in POST /contacts: scalars, `null` removes the key.',
            propertyNames: { pattern: '^[A-Za-z0-9_.-]{1,64}$' },
            additionalProperties: {
              anyOf: [{ type: 'string', maxLength: MAX_PROPERTY_STRING }, { type: 'number' }, { type: 'boolean' }, { type: 'null' }],
            },
          },
          topics: {
            type: 'array',
            maxItems: MAX_TOPIC_CHANGES,
            description: 'Topic slugs (meaning subscribed) or `{topic, state}`; each topic once.',
            items: { anyOf: [slug, obj({ topic: slug, state: { type: 'string', enum: [...SUBSCRIPTION_STATES] } }, ['topic', 'state'])] },
          },
        },
        ['type'],
        { anyOf: [{ required: ['properties'] }, { required: ['topics'] }] },
      ),
    ],
  },
};
