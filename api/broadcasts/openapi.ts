import type { JsonSchema, Operation } from '../openapi/operation';
import { listOf, ref } from '../openapi/common';
import { listQuerySchema } from '../validate';
import { createBroadcastSchema } from './schema';

/** OpenAPI operations of /broadcasts (api/broadcasts/routes.ts); responses as api/broadcasts/present.ts answers them. */

const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
const nullableDateTime: JsonSchema = { type: ['string', 'null'], format: 'date-time' };
const count: JsonSchema = { type: 'integer', minimum: 0 };

const PROGRESS = ['queued', 'sent', 'delivered', 'bounced', 'complained', 'unsubscribed', 'suppressed', 'failed', 'canceled'] as const;

/** The fields of the broadcast object (presentBroadcast), before what cancel adds. */
const broadcastFields: Record<string, JsonSchema> = {
  object: { const: 'broadcast' },
  id: { type: 'string', format: 'uuid' },
  name: { type: ['string', 'null'] },
  segment_id: { type: 'string', format: 'uuid' },
  from: { type: 'string', description: 'As given: an address or `Name <address>`.' },
  topic: { type: ['string', 'null'], description: 'The topic slug.' },
  kind: { type: 'string' },
  subject: { type: ['string', 'null'], description: 'Null with a template (each message renders its own).' },
  template: {
    type: ['object', 'null'],
    description: 'The published version fixed at creation; null without a template.',
    properties: { id: { type: 'string', format: 'uuid' }, version: { type: 'integer', minimum: 1 } },
    required: ['id', 'version'],
    additionalProperties: false,
  },
  status: {
    type: 'string',
    enum: ['queued', 'sending', 'sent', 'canceled', 'failed'],
    description:
      '`queued` (waiting for its time or its fan-out), `sending` (audience frozen, messages going out), `sent` (fan-out complete and nothing waiting), `canceled`, `failed` (`failure` says why).',
  },
  recipients: { type: ['integer', 'null'], minimum: 0, description: "The frozen audience's size; null until the fan-out starts." },
  progress: {
    type: 'object',
    description:
      'Messages by state: `queued` has not left yet (daily caps included); `failed` includes recipients the template could not render for.',
    properties: Object.fromEntries(PROGRESS.map((k) => [k, count])),
    required: [...PROGRESS],
    additionalProperties: false,
  },
  failure: { type: ['string', 'null'] },
  scheduled_at: nullableDateTime,
  created_at: dateTime,
  started_at: { ...nullableDateTime, description: 'When the audience was frozen.' },
  enqueued_at: { ...nullableDateTime, description: 'When every recipient had been accepted.' },
  canceled_at: nullableDateTime,
};

const broadcastWith = (extra: Record<string, JsonSchema>): JsonSchema => ({
  type: 'object',
  properties: { ...broadcastFields, ...extra },
  required: [...Object.keys(broadcastFields), ...Object.keys(extra)],
  additionalProperties: false,
});

export const schemas: Record<string, JsonSchema> = {
  Broadcast: broadcastWith({}),
  CanceledBroadcast: broadcastWith({ canceled: { ...count, description: 'Messages canceled by this call.' } }),
};

const idParam = { id: { description: 'The broadcast id.', schema: { type: 'string' } } };

const example = {
  object: 'broadcast',
  id: '0192f0c4-8a1e-7c3b-9a51-3f1d2b7c9e10',
  name: 'January news',
  segment_id: '0192f0c2-1d3e-7f40-8b6a-2c9e4d5f6a7b',
  from: 'News <news@mail.example.com>',
  topic: 'news',
  kind: 'broadcast.default',
  subject: 'What is new in January',
  template: null,
  status: 'queued',
  recipients: null,
  progress: { queued: 0, sent: 0, delivered: 0, bounced: 0, complained: 0, unsubscribed: 0, suppressed: 0, failed: 0, canceled: 0 },
  failure: null,
  scheduled_at: null,
  created_at: '2025-01-01T00:00:00.000Z',
  started_at: null,
  enqueued_at: null,
  canceled_at: null,
};

const broadcastLinks = {
  GetBroadcast: { operationId: 'getBroadcast', parameters: { id: '$response.body#/id' } },
  CancelBroadcast: { operationId: 'cancelBroadcast', parameters: { id: '$response.body#/id' } },
};

export const operations: Operation[] = [
  {
    method: 'post',
    path: '/broadcasts',
    operationId: 'createBroadcast',
    summary: 'Create a broadcast',
    description:
      'One message to every eligible member of a segment. Either `subject` and `html` or `text` (or both), or a `template` `{id|slug, version?}` without `data` (each message renders from its contact). `kind` (default `broadcast.default`) must be a bulk kind; `from` a verified bulk-stream domain the key may use; `scheduled_at` at most 30 days ahead. Test keys: 403.',
    tag: 'Broadcasts',
    permission: 'admin',
    body: createBroadcastSchema,
    requestExample: {
      segment_id: example.segment_id,
      from: example.from,
      name: example.name,
      topic: 'news',
      subject: example.subject,
      html: '<p>Hello {{first_name}}</p>',
    },
    responses: { 201: { description: 'The broadcast, `queued`.', schema: ref('Broadcast'), example } },
    errors: ['not_found', 'unknown_topic', 'domain_not_verified', 'stream_mismatch', 'template_not_found'],
    links: { 201: broadcastLinks },
  },
  {
    method: 'get',
    path: '/broadcasts',
    operationId: 'listBroadcasts',
    summary: 'List broadcasts',
    description: 'Newest first.',
    tag: 'Broadcasts',
    permission: 'admin',
    query: listQuerySchema,
    responses: { 200: { description: 'A page of broadcasts.', schema: listOf('Broadcast') } },
    errors: ['invalid_cursor'],
  },
  {
    method: 'get',
    path: '/broadcasts/{id}',
    operationId: 'getBroadcast',
    summary: 'Get a broadcast',
    tag: 'Broadcasts',
    permission: 'admin',
    params: idParam,
    responses: { 200: { description: 'The broadcast and its progress.', schema: ref('Broadcast'), example } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/broadcasts/{id}/cancel',
    operationId: 'cancelBroadcast',
    summary: 'Cancel a broadcast',
    description:
      'The broadcast becomes `canceled` and every message of it not yet picked up by a worker is canceled. A broadcast already `sent`, `canceled` or `failed`: 409 `not_cancelable`.',
    tag: 'Broadcasts',
    permission: 'admin',
    params: idParam,
    responses: {
      200: {
        description: 'The broadcast, with how many messages were canceled.',
        schema: ref('CanceledBroadcast'),
        example: { ...example, status: 'canceled', canceled_at: '2025-01-01T00:01:00.000Z', canceled: 0 },
      },
    },
    errors: ['not_found', 'not_cancelable'],
  },
];
