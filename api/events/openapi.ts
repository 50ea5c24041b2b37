import type { JsonSchema, Operation } from '../openapi/operation';
import { ref } from '../openapi/common';
import { propertiesPatch, withFields } from '../contacts/openapi-bodies';
import { eventSchema } from '../../core/automations/events';
import { MAX_EVENT_NAME } from '../../core/automations/limits';

/** OpenAPI operation of POST /events (api/events/routes.ts). */

export const schemas: Record<string, JsonSchema> = {
  EventAccepted: {
    type: 'object',
    properties: {
      id: { type: 'string', minLength: 1, maxLength: MAX_EVENT_NAME, description: 'The event id: as given, else a random UUID.' },
      runs: { type: 'integer', minimum: 0, description: 'Automation runs this event started.' },
    },
    required: ['id', 'runs'],
    additionalProperties: false,
  },
};

export const operations: Operation[] = [
  {
    method: 'post',
    path: '/events',
    operationId: 'postEvent',
    summary: 'Record an event for a contact',
    description:
      'Upserts the contact by `email` (created if new), merges `data` into its properties (the contact property rules: scalars, `null` deletes a key), starts one run per enabled automation triggered by `name` and resumes runs waiting for it. The same `id` for the same automation and contact never starts a second run. Test keys: 403 `test_key_not_allowed`.',
    tag: 'Events',
    body: withFields(eventSchema, { data: propertiesPatch("Merged into the contact's properties and the runs' template data") }),
    requestExample: { name: 'signed_up', email: 'ann@example.com', data: { plan: 'pro' } },
    responses: {
      200: { description: 'Recorded.', schema: ref('EventAccepted'), example: { id: '6f1c2c1e-2b0a-4d4e-9d56-0d8b3c1f7a21', runs: 1 } },
    },
    errors: ['test_key_not_allowed', 'contact_quota_exceeded', 'run_quota_exceeded'],
  },
];
