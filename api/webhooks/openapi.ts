import type { JsonSchema, Operation } from '../openapi/operation';
import { listOf, ref } from '../openapi/common';
import { WEBHOOK_EVENTS } from '../../core/webhooks/events';
import { listQuerySchema } from '../validate';
import { createWebhookSchema, deliveriesQuerySchema, recoverSchema, updateWebhookSchema } from './schema';

/** OpenAPI operations of /webhooks (api/webhooks/routes.ts); responses as api/webhooks/present.ts answers them. */

const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
const uuid: JsonSchema = { type: 'string', format: 'uuid' };

/** The fields of the webhook object (presentWebhook), before what create, rotate and delete add. */
const webhookFields: Record<string, JsonSchema> = {
  object: { const: 'webhook' },
  id: uuid,
  url: { type: 'string' },
  description: { type: ['string', 'null'] },
  events: {
    type: ['array', 'null'],
    items: { type: 'string', enum: [...WEBHOOK_EVENTS] },
    description: 'The event names it receives; null: every event.',
  },
  enabled: { type: 'boolean' },
  disabled_reason: {
    type: 'string',
    enum: ['api', 'gone', 'failing'],
    description: 'Only while disabled: `api` (PATCH), `gone` (the endpoint answered 410), `failing` (5 days of failures).',
  },
  created_at: dateTime,
  updated_at: dateTime,
};
const webhookRequired = Object.keys(webhookFields).filter((k) => k !== 'disabled_reason');

const webhookWith = (extra: Record<string, JsonSchema>, description?: string): JsonSchema => ({
  type: 'object',
  ...(description ? { description } : {}),
  properties: { ...webhookFields, ...extra },
  required: [...webhookRequired, ...Object.keys(extra)],
  additionalProperties: false,
  // `disabled_reason` is there exactly while the webhook is disabled.
  if: { properties: { enabled: { const: false } } },
  then: { required: ['disabled_reason'] },
  else: { not: { required: ['disabled_reason'] } },
});

const secret: JsonSchema = {
  type: 'string',
  pattern: '^whsec_[A-Za-z0-9+/]{43}=$',
  description: 'The signing secret (`whsec_` + base64 of 32 bytes), shown this once.',
};

export const schemas: Record<string, JsonSchema> = {
  Webhook: webhookWith({}),
  CreatedWebhook: webhookWith({ secret }, 'The webhook, with its signing secret shown this once.'),
  WebhookSecretRotation: webhookWith({
    secret,
    previous_secret_expires_at: { ...dateTime, description: 'Until then the replaced secret keeps signing beside the new one.' },
  }),
  DeletedWebhook: webhookWith({ deleted: { const: true } }),
  WebhookDelivery: {
    type: 'object',
    properties: {
      object: { const: 'webhook_delivery' },
      id: { ...uuid, description: 'The `webhook-id` header of its POSTs.' },
      webhook_id: uuid,
      event_type: { type: 'string', enum: [...WEBHOOK_EVENTS] },
      status: { type: 'string', enum: ['pending', 'succeeded', 'failed'] },
      attempts: { type: 'integer', minimum: 0 },
      last_status_code: { type: ['integer', 'null'] },
      last_error: { type: ['string', 'null'] },
      last_response: { type: ['string', 'null'], description: 'The first 4 KiB of the last answer.' },
      next_attempt_at: { type: ['string', 'null'], format: 'date-time', description: 'Null unless pending.' },
      created_at: dateTime,
    },
    required: [
      'object',
      'id',
      'webhook_id',
      'event_type',
      'status',
      'attempts',
      'last_status_code',
      'last_error',
      'last_response',
      'next_attempt_at',
      'created_at',
    ],
    additionalProperties: false,
  },
  WebhookRecovery: {
    type: 'object',
    properties: {
      object: { const: 'webhook_recovery' },
      webhook_id: uuid,
      since: dateTime,
      requeued: { type: 'integer', minimum: 0, description: 'Failed deliveries started over.' },
    },
    required: ['object', 'webhook_id', 'since', 'requeued'],
    additionalProperties: false,
  },
};

const idParam = { id: { description: 'The webhook id.', schema: { type: 'string' } } };

const example = {
  object: 'webhook',
  id: '0192f0c4-8a1e-7c3b-9a51-3f1d2b7c9e10',
  url: 'https://hooks.example.com/mail',
  description: 'bounces to the CRM',
  events: ['email.bounced', 'email.complained'],
  enabled: true,
  created_at: '2025-01-01T00:00:00.000Z',
  updated_at: '2025-01-01T00:00:00.000Z',
};
const exampleSecret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw+gbi2kq1pr8=';

const deliveryExample = {
  object: 'webhook_delivery',
  id: '0192f0c5-0b7d-7a11-8c2e-5d4f3a2b1c0d',
  webhook_id: example.id,
  event_type: 'email.bounced',
  status: 'pending',
  attempts: 0,
  last_status_code: null,
  last_error: null,
  last_response: null,
  next_attempt_at: '2025-01-01T00:00:05.000Z',
  created_at: '2025-01-01T00:00:00.000Z',
};

const webhookLinks = {
  GetWebhook: { operationId: 'getWebhook', parameters: { id: '$response.body#/id' } },
  UpdateWebhook: { operationId: 'updateWebhook', parameters: { id: '$response.body#/id' } },
  ListWebhookDeliveries: { operationId: 'listWebhookDeliveries', parameters: { id: '$response.body#/id' } },
  RotateWebhookSecret: { operationId: 'rotateWebhookSecret', parameters: { id: '$response.body#/id' } },
  RecoverWebhookDeliveries: { operationId: 'recoverWebhookDeliveries', parameters: { id: '$response.body#/id' } },
  DeleteWebhook: { operationId: 'deleteWebhook', parameters: { id: '$response.body#/id' } },
};

export const operations: Operation[] = [
  {
    method: 'post',
    path: '/webhooks',
    operationId: 'createWebhook',
    summary: 'Create a webhook',
    description:
      'The `url` must be absolute https without credentials, naming no private, loopback, link-local or metadata address (unless the operator allows them); `events` omitted or null: every event. The answer carries the signing `secret`, shown this once.',
    tag: 'Webhooks',
    permission: 'admin',
    body: createWebhookSchema,
    requestExample: {
      url: 'https://hooks.example.com/mail',
      events: ['email.bounced', 'email.complained'],
      description: 'bounces to the CRM',
    },
    responses: {
      201: { description: 'The webhook and its secret.', schema: ref('CreatedWebhook'), example: { ...example, secret: exampleSecret } },
    },
    errors: [],
    links: { 201: webhookLinks },
  },
  {
    method: 'get',
    path: '/webhooks',
    operationId: 'listWebhooks',
    summary: 'List webhooks',
    description: 'Newest first. Never secrets.',
    tag: 'Webhooks',
    permission: 'admin',
    query: listQuerySchema,
    responses: { 200: { description: 'A page of webhooks.', schema: listOf('Webhook') } },
    errors: ['invalid_cursor'],
  },
  {
    method: 'get',
    path: '/webhooks/{id}',
    operationId: 'getWebhook',
    summary: 'Get a webhook',
    tag: 'Webhooks',
    permission: 'admin',
    params: idParam,
    responses: { 200: { description: 'The webhook.', schema: ref('Webhook'), example } },
    errors: ['not_found'],
  },
  {
    method: 'patch',
    path: '/webhooks/{id}',
    operationId: 'updateWebhook',
    summary: 'Update a webhook',
    description:
      'Any of `url`, `events`, `description`, `enabled`. `enabled: false` sets `disabled_reason: "api"`; `enabled: true` clears the reason and the failure streak and resends nothing (`recover` does).',
    tag: 'Webhooks',
    permission: 'admin',
    params: idParam,
    body: updateWebhookSchema,
    requestExample: { enabled: false },
    responses: { 200: { description: 'The webhook after the change.', schema: ref('Webhook') } },
    errors: ['not_found'],
  },
  {
    method: 'delete',
    path: '/webhooks/{id}',
    operationId: 'deleteWebhook',
    summary: 'Delete a webhook',
    description: 'Deletes the webhook and its deliveries.',
    tag: 'Webhooks',
    permission: 'admin',
    params: idParam,
    responses: { 200: { description: 'The webhook as it was.', schema: ref('DeletedWebhook'), example: { ...example, deleted: true } } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/webhooks/{id}/rotate-secret',
    operationId: 'rotateWebhookSecret',
    summary: "Rotate a webhook's signing secret",
    description:
      'A new `secret`; the one it replaces keeps signing beside it until `previous_secret_expires_at` (24 hours). A second rotation within those 24 hours drops the oldest.',
    tag: 'Webhooks',
    permission: 'admin',
    params: idParam,
    responses: {
      200: {
        description: 'The webhook with its new secret, shown this once.',
        schema: ref('WebhookSecretRotation'),
        example: { ...example, secret: exampleSecret, previous_secret_expires_at: '2025-01-02T00:00:00.000Z' },
      },
    },
    errors: ['not_found'],
  },
  {
    method: 'get',
    path: '/webhooks/{id}/deliveries',
    operationId: 'listWebhookDeliveries',
    summary: "List a webhook's deliveries",
    description: 'Newest first; `status` filters.',
    tag: 'Webhooks',
    permission: 'admin',
    params: idParam,
    query: deliveriesQuerySchema,
    responses: { 200: { description: 'A page of deliveries.', schema: listOf('WebhookDelivery') } },
    errors: ['not_found', 'invalid_cursor'],
  },
  {
    method: 'post',
    path: '/webhooks/{id}/deliveries/{delivery_id}/retry',
    operationId: 'retryWebhookDelivery',
    summary: 'Start a delivery over',
    description:
      'Any status: the delivery becomes `pending`, due now, with the full retry schedule again; a run of it still waiting stops. A disabled webhook: 409 `webhook_disabled`.',
    tag: 'Webhooks',
    permission: 'admin',
    params: { ...idParam, delivery_id: { description: 'The delivery id.', schema: { type: 'string' } } },
    responses: { 202: { description: 'The delivery, pending again.', schema: ref('WebhookDelivery'), example: deliveryExample } },
    errors: ['not_found', 'webhook_disabled'],
  },
  {
    method: 'post',
    path: '/webhooks/{id}/recover',
    operationId: 'recoverWebhookDeliveries',
    summary: 'Start failed deliveries over',
    description:
      'Every `failed` delivery of the webhook created at or after `since` starts over. A disabled webhook: 409 `webhook_disabled`.',
    tag: 'Webhooks',
    permission: 'admin',
    params: idParam,
    body: recoverSchema,
    requestExample: { since: '2025-01-01T00:00:00Z' },
    responses: {
      202: {
        description: 'How many deliveries were started over.',
        schema: ref('WebhookRecovery'),
        example: { object: 'webhook_recovery', webhook_id: example.id, since: '2025-01-01T00:00:00.000Z', requeued: 3 },
      },
    },
    errors: ['not_found', 'webhook_disabled'],
  },
];
