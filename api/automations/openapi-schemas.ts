import type { JsonSchema } from '../openapi/operation';
import { ref } from '../openapi/common';
import { SUBSCRIPTION_STATES } from '../../core/contacts/rules';
import { RUN_STATUSES } from './schema';

/**
 * The answers of /automations and /automation-runs as api/automations/present.ts makes them: the
 * automation with its latest version's steps as stored (core/automations/definition.ts's
 * AutomationStep: normalized, durations also in seconds), and the run with its history as the
 * run's activities write it (activities/automation-run.ts, db/sql/automation-run-*.ts).
 */

const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
const nullableDateTime: JsonSchema = { type: ['string', 'null'], format: 'date-time' };
const uuid: JsonSchema = { type: 'string', format: 'uuid' };
const STEP_TYPES = ['delay', 'send_email', 'wait_for_event', 'condition', 'update_contact'];

const obj = (properties: Record<string, JsonSchema>, optional: string[] = [], extra: JsonSchema = {}): JsonSchema => ({
  type: 'object',
  properties,
  required: Object.keys(properties).filter((k) => !optional.includes(k)),
  additionalProperties: false,
  ...extra,
});

const type = (name: string): JsonSchema => ({ const: name });
const given: JsonSchema = { type: ['integer', 'string'], description: 'As written: whole seconds or an ISO 8601 duration.' };
const seconds: JsonSchema = { type: 'integer', minimum: 0 };
const topicChange = obj({ topic: { type: 'string' }, state: { type: 'string', enum: [...SUBSCRIPTION_STATES] } });

/** The fields of the automation object (presentAutomation), before what delete adds. */
const automationFields: Record<string, JsonSchema> = {
  object: { const: 'automation' },
  id: uuid,
  name: { type: 'string' },
  enabled: { type: 'boolean' },
  version: { type: 'integer', minimum: 1, description: 'Each PUT makes a new version; runs keep the version they started with.' },
  trigger: ref('AutomationTrigger'),
  steps: { type: 'array', items: ref('AutomationStep') },
  created_at: dateTime,
  updated_at: dateTime,
};

/** A history entry's `result`, by step type and outcome. */
const stepResult: JsonSchema = {
  anyOf: [
    obj({ outcome: { enum: ['elapsed', 'timeout', 'updated'] } }),
    obj({ outcome: { enum: ['accepted', 'suppressed'] }, email_id: uuid, suppressed: { type: 'array', items: { type: 'string' } } }),
    obj({ outcome: { const: 'refused' }, code: { type: 'string' }, message: { type: 'string' } }, ['message']),
    obj({ outcome: { const: 'event' }, event: { type: 'string' }, event_id: { type: 'string' }, at: dateTime }),
    obj({ branch: { enum: ['then', 'else'] } }),
  ],
};

export const responseSchemas: Record<string, JsonSchema> = {
  AutomationStep: {
    description: 'A step as stored: normalized, with each delay also in `seconds` and each timeout in `timeout_seconds`.',
    oneOf: [
      obj({ type: type('delay'), duration: given, seconds }),
      obj({
        type: type('send_email'),
        from: { type: 'string' },
        template: obj({
          id: { type: ['string', 'null'], format: 'uuid' },
          slug: { type: ['string', 'null'] },
          version: { type: ['integer', 'null'], description: 'Null: the latest published version when the step runs.' },
        }),
        kind: { type: ['string', 'null'] },
        tags: { type: 'array', items: obj({ name: { type: 'string' }, value: { type: 'string' } }) },
      }),
      obj({ type: type('wait_for_event'), event: { type: 'string' }, timeout: given, timeout_seconds: seconds }),
      obj({
        type: type('condition'),
        if: ref('AutomationCondition'),
        then: { type: 'array', items: ref('AutomationStep') },
        else: { type: 'array', items: ref('AutomationStep') },
      }),
      obj({
        type: type('update_contact'),
        properties: {
          type: ['object', 'null'],
          properties: {
            set: { type: 'object', additionalProperties: { type: ['string', 'number', 'boolean'] } },
            remove: { type: 'array', items: { type: 'string' } },
          },
          required: ['set', 'remove'],
          additionalProperties: false,
        },
        topics: { type: 'array', items: topicChange },
      }),
    ],
  },
  Automation: obj(automationFields),
  DeletedAutomation: obj({
    ...automationFields,
    deleted: { const: true },
    canceled_runs: { type: 'integer', minimum: 0, description: 'Runs still running or waiting that the deletion canceled.' },
  }),
  AutomationRun: obj(
    {
      object: { const: 'automation_run' },
      id: uuid,
      automation_id: uuid,
      version: { type: 'integer', minimum: 1 },
      status: { type: 'string', enum: [...RUN_STATUSES] },
      step: { type: ['string', 'null'], description: 'The path of the step in progress, such as `steps[2].then[0]`.' },
      waiting_for: obj({ event: { type: ['string', 'null'] }, until: nullableDateTime }, [], {
        description: 'Only while `waiting`: the event that resumes the run and its deadline.',
      }),
      reason: { type: ['string', 'null'], description: 'Why it ended: `canceled`, `contact_deleted`, `<step path>: <code>`, ...' },
      trigger: {
        description:
          'What started the run: POST /events (`event` and its `event_id`; `type` `contact.created` when the event created the contact), or a contact write (`at`, and the topic slug of a subscription while the topic exists).',
        oneOf: [
          obj({ type: { enum: ['event', 'contact.created'] }, event: { type: 'string' }, event_id: { type: 'string' } }),
          obj({ type: { enum: ['contact.created', 'topic.subscribed'] }, topic: { type: 'string' }, at: dateTime }, ['topic']),
        ],
      },
      contact: obj({ id: uuid, email: { type: 'string' } }),
      history: {
        type: 'array',
        description: 'One entry per step reached.',
        items: obj(
          {
            step: { type: 'string' },
            type: { type: 'string', enum: STEP_TYPES },
            started_at: dateTime,
            finished_at: dateTime,
            until: { ...dateTime, description: 'delay and wait_for_event: when it ends.' },
            parked: { const: true, description: 'A delay of a minute or more: the run is only its row until then.' },
            event: { type: 'string', description: 'wait_for_event: the event it waits for.' },
            result: stepResult,
          },
          ['finished_at', 'until', 'parked', 'event', 'result'],
        ),
      },
      created_at: dateTime,
      started_at: { ...nullableDateTime, description: 'When its workflow last started: null while parked.' },
      finished_at: nullableDateTime,
    },
    ['waiting_for'],
    {
      if: { properties: { status: { const: 'waiting' } } },
      then: { required: ['waiting_for'] },
      else: { not: { required: ['waiting_for'] } },
    },
  ),
};
