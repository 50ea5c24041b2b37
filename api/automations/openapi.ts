import type { JsonSchema, Operation } from '../openapi/operation';
import { listOf, ref } from '../openapi/common';
import { listQuerySchema } from '../validate';
import { definitionSchemas } from './openapi-definition';
import { responseSchemas } from './openapi-schemas';
import { listRunsQuerySchema, patchAutomationSchema } from './schema';

/**
 * OpenAPI operations of /automations and /automation-runs (api/automations/routes.ts). The
 * definition body of POST and PUT is a JSON Schema (`{ json }`, api/automations/openapi-definition.ts
 * says why), the PATCH body and the list queries the routes' own yup schemas.
 */

export const schemas: Record<string, JsonSchema> = { ...definitionSchemas, ...responseSchemas };

const idParam = { id: { description: 'The automation id.', schema: { type: 'string' } } };
const runParam = { id: { description: 'The run id.', schema: { type: 'string' } } };

const definitionExample = {
  name: 'Welcome series',
  trigger: { event: 'signed_up' },
  steps: [
    { type: 'send_email', from: 'Team <hello@mail.example.com>', template: { slug: 'welcome' } },
    { type: 'delay', duration: 'P2D' },
    {
      type: 'condition',
      if: { property: 'plan', equals: 'pro' },
      then: [{ type: 'send_email', from: 'Team <hello@mail.example.com>', template: { slug: 'pro-tips' } }],
    },
  ],
};

const sendStep = (slug: string) => ({
  type: 'send_email',
  from: 'Team <hello@mail.example.com>',
  template: { id: null, slug, version: null },
  kind: null,
  tags: [],
});
const example = {
  object: 'automation',
  id: '0192f0c4-8a1e-7c3b-9a51-3f1d2b7c9e10',
  name: 'Welcome series',
  enabled: true,
  version: 1,
  trigger: { event: 'signed_up' },
  steps: [
    sendStep('welcome'),
    { type: 'delay', duration: 'P2D', seconds: 172800 },
    { type: 'condition', if: { property: 'plan', equals: 'pro' }, then: [sendStep('pro-tips')], else: [] },
  ],
  created_at: '2025-01-01T00:00:00.000Z',
  updated_at: '2025-01-01T00:00:00.000Z',
};

const runExample = {
  object: 'automation_run',
  id: '6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f',
  automation_id: example.id,
  version: 1,
  status: 'running',
  step: 'steps[1]',
  reason: null,
  trigger: { type: 'event', event: 'signed_up', event_id: 'evt_123' },
  contact: { id: '0192f0c3-5a6b-7c8d-9e0f-1a2b3c4d5e6f', email: 'ann@example.com' },
  history: [
    {
      step: 'steps[0]',
      type: 'send_email',
      started_at: '2025-01-01T00:00:01.000Z',
      finished_at: '2025-01-01T00:00:01.000Z',
      result: { outcome: 'accepted', email_id: '0192f0c5-0b7d-7a11-8c2e-5d4f3a2b1c0d', suppressed: [] },
    },
    { step: 'steps[1]', type: 'delay', started_at: '2025-01-01T00:00:01.000Z', until: '2025-01-03T00:00:01.000Z', parked: true },
  ],
  created_at: '2025-01-01T00:00:00.000Z',
  started_at: null,
  finished_at: null,
};

const automationLinks = {
  GetAutomation: { operationId: 'getAutomation', parameters: { id: '$response.body#/id' } },
  ReplaceAutomation: { operationId: 'replaceAutomation', parameters: { id: '$response.body#/id' } },
  SetAutomationEnabled: { operationId: 'setAutomationEnabled', parameters: { id: '$response.body#/id' } },
  ListAutomationRuns: { operationId: 'listAutomationRuns', parameters: { id: '$response.body#/id' } },
  DeleteAutomation: { operationId: 'deleteAutomation', parameters: { id: '$response.body#/id' } },
};

const definitionBody = { json: ref('AutomationInput') };
const definitionDescription =
  'Invalid definitions answer 422 `validation_error` with every problem as a detail whose `field` is its path (`steps[2].then[0].template`, `trigger.topic_subscribed`); templates must have a published version and topics must exist. Nothing is written on a refusal.';

export const operations: Operation[] = [
  {
    method: 'post',
    path: '/automations',
    operationId: 'createAutomation',
    summary: 'Create an automation',
    description: `A trigger and 1–100 steps (delay, send_email, wait_for_event, condition, update_contact). ${definitionDescription}`,
    tag: 'Automations',
    permission: 'admin',
    body: definitionBody,
    requestExample: definitionExample,
    responses: { 201: { description: 'The automation, version 1.', schema: ref('Automation'), example } },
    errors: [],
    links: { 201: automationLinks },
  },
  {
    method: 'get',
    path: '/automations',
    operationId: 'listAutomations',
    summary: 'List automations',
    description: 'Newest first; deleted ones are not listed.',
    tag: 'Automations',
    permission: 'admin',
    query: listQuerySchema,
    responses: { 200: { description: 'A page of automations.', schema: listOf('Automation') } },
    errors: ['invalid_cursor'],
  },
  {
    method: 'get',
    path: '/automations/{id}',
    operationId: 'getAutomation',
    summary: 'Get an automation',
    tag: 'Automations',
    permission: 'admin',
    params: idParam,
    responses: { 200: { description: "The automation with its latest version's definition.", schema: ref('Automation'), example } },
    errors: ['not_found'],
  },
  {
    method: 'put',
    path: '/automations/{id}',
    operationId: 'replaceAutomation',
    summary: "Replace an automation's definition",
    description: `The whole definition again: a new \`version\`; runs in progress keep the version they started with; \`enabled\` omitted keeps the current value. ${definitionDescription}`,
    tag: 'Automations',
    permission: 'admin',
    params: idParam,
    body: definitionBody,
    requestExample: definitionExample,
    responses: {
      200: { description: 'The automation, its version one higher.', schema: ref('Automation'), example: { ...example, version: 2 } },
    },
    errors: ['not_found'],
  },
  {
    method: 'patch',
    path: '/automations/{id}',
    operationId: 'setAutomationEnabled',
    summary: 'Enable or disable an automation',
    description: 'Re-enabled, it reacts only to triggers from then on.',
    tag: 'Automations',
    permission: 'admin',
    params: idParam,
    body: patchAutomationSchema,
    requestExample: { enabled: false },
    responses: { 200: { description: 'The automation.', schema: ref('Automation'), example: { ...example, enabled: false } } },
    errors: ['not_found'],
  },
  {
    method: 'delete',
    path: '/automations/{id}',
    operationId: 'deleteAutomation',
    summary: 'Delete an automation',
    description: 'Runs still `running` or `waiting` are canceled; its runs stay readable.',
    tag: 'Automations',
    permission: 'admin',
    params: idParam,
    responses: {
      200: {
        description: 'The automation as it was, with how many runs were canceled.',
        schema: ref('DeletedAutomation'),
        example: { ...example, enabled: false, deleted: true, canceled_runs: 0 },
      },
    },
    errors: ['not_found'],
  },
  {
    method: 'get',
    path: '/automations/{id}/runs',
    operationId: 'listAutomationRuns',
    summary: "List an automation's runs",
    description: 'Newest first; `status` filters. The runs of a deleted automation stay readable.',
    tag: 'Automations',
    permission: 'admin',
    params: idParam,
    query: listRunsQuerySchema,
    responses: { 200: { description: 'A page of runs.', schema: listOf('AutomationRun') } },
    errors: ['not_found', 'invalid_cursor'],
  },
  {
    method: 'get',
    path: '/automation-runs/{id}',
    operationId: 'getAutomationRun',
    summary: 'Get an automation run',
    tag: 'Automations',
    permission: 'admin',
    params: runParam,
    responses: {
      200: { description: 'The run: where it is, what it did, why it ended.', schema: ref('AutomationRun'), example: runExample },
    },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/automation-runs/{id}/cancel',
    operationId: 'cancelAutomationRun',
    summary: 'Cancel an automation run',
    description:
      'A `running` or `waiting` run becomes `canceled` at once (a message already accepted still goes); a run that ended: 409 `not_cancelable`.',
    tag: 'Automations',
    permission: 'admin',
    params: runParam,
    responses: {
      200: {
        description: 'The run, canceled.',
        schema: ref('AutomationRun'),
        example: { ...runExample, status: 'canceled', step: 'steps[1]', reason: 'canceled', finished_at: '2025-01-01T00:05:00.000Z' },
      },
    },
    errors: ['not_found', 'not_cancelable'],
  },
];
