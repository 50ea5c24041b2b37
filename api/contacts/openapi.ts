import type { JsonSchema, Operation } from '../openapi/operation';
import { listOf, ref } from '../openapi/common';
import { CONTACT_STATUSES, MAX_CONTACT_NAME, MAX_PROPERTIES, PROPERTY_KEY_RE, SUBSCRIPTION_STATES } from '../../core/contacts/rules';
import { subscriptionsBody, upsertBody } from './openapi-bodies';
import { listContactsQuerySchema } from './schema';

/** OpenAPI operations of /contacts (api/contacts/routes.ts); responses as api/contacts/present.ts answers them. */

const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
const nullableName: JsonSchema = { type: ['string', 'null'], maxLength: MAX_CONTACT_NAME };

/** The fields every contact shape has (present.ts), before `created` or `deleted`. */
const contactFields: Record<string, JsonSchema> = {
  object: { const: 'contact' },
  id: { type: 'string', format: 'uuid' },
  email: { type: 'string', format: 'email', description: 'Lower-cased, trimmed; unique in the organization.' },
  first_name: nullableName,
  last_name: nullableName,
  status: { type: 'string', enum: [...CONTACT_STATUSES] },
  properties: {
    type: 'object',
    description: 'Scalar values; names 1–64 of `A-Za-z0-9_.-`.',
    maxProperties: MAX_PROPERTIES,
    propertyNames: { pattern: PROPERTY_KEY_RE.source },
    additionalProperties: { type: ['string', 'number', 'boolean'] },
  },
  subscriptions: {
    type: 'array',
    items: ref('ContactSubscription'),
    description: 'One entry per topic of the organization, in slug order.',
  },
  created_at: dateTime,
  updated_at: dateTime,
};
const contactRequired = Object.keys(contactFields);

const contactWith = (extra: Record<string, JsonSchema>): JsonSchema => ({
  type: 'object',
  properties: { ...contactFields, ...extra },
  required: [...contactRequired, ...Object.keys(extra)],
  additionalProperties: false,
});

export const schemas: Record<string, JsonSchema> = {
  ContactSubscription: {
    type: 'object',
    description:
      'The effective state: the explicit row when there is one, else the topic default (`explicit` false, `changed_at` and `source` null).',
    properties: {
      topic: { type: 'string', description: 'The topic slug.' },
      state: { type: 'string', enum: [...SUBSCRIPTION_STATES] },
      explicit: { type: 'boolean' },
      changed_at: { type: ['string', 'null'], format: 'date-time' },
      source: { type: ['string', 'null'] },
    },
    required: ['topic', 'state', 'explicit', 'changed_at', 'source'],
    additionalProperties: false,
  },
  Contact: contactWith({}),
  UpsertedContact: contactWith({ created: { type: 'boolean', description: 'True when this call created the contact.' } }),
  DeletedContact: contactWith({ deleted: { const: true } }),
};

const contactParam = {
  id: { description: 'The contact id, or its email address (URL-encoded, any case).', schema: { type: 'string' } },
};

const example = {
  object: 'contact',
  id: '0192f0c4-8a1e-7c3b-9a51-3f1d2b7c9e10',
  email: 'ann@example.com',
  first_name: 'Ann',
  last_name: null,
  status: 'subscribed',
  properties: { plan: 'pro' },
  subscriptions: [{ topic: 'news', state: 'subscribed', explicit: true, changed_at: '2025-01-01T00:00:00.000Z', source: 'api' }],
  created_at: '2025-01-01T00:00:00.000Z',
  updated_at: '2025-01-01T00:00:00.000Z',
};

const contactLinks = {
  GetContact: { operationId: 'getContact', parameters: { id: '$response.body#/id' } },
  ChangeSubscriptions: { operationId: 'changeContactSubscriptions', parameters: { id: '$response.body#/id' } },
  DeleteContact: { operationId: 'deleteContact', parameters: { id: '$response.body#/id' } },
};

export const operations: Operation[] = [
  {
    method: 'post',
    path: '/contacts',
    operationId: 'upsertContact',
    summary: 'Create or update a contact by email',
    description:
      '`properties` are merged into the stored ones (`null` deletes a key; values are strings up to 1000 characters, finite numbers or booleans; at most 100 keys after merging). `topics` subscribes: a missing slug that fits the slug rule is created. Test keys: 403 `test_key_not_allowed`.',
    tag: 'Contacts',
    body: upsertBody,
    requestExample: { email: 'ann@example.com', first_name: 'Ann', properties: { plan: 'pro' }, topics: ['news'] },
    responses: {
      200: { description: 'The contact existed: updated.', schema: ref('UpsertedContact'), example: { ...example, created: false } },
      201: { description: 'The contact was created.', schema: ref('UpsertedContact'), example: { ...example, created: true } },
    },
    errors: ['test_key_not_allowed', 'unknown_topic'],
    links: { 200: contactLinks, 201: contactLinks },
  },
  {
    method: 'get',
    path: '/contacts',
    operationId: 'listContacts',
    summary: 'List contacts',
    description: 'Newest first. Filters combine with AND; `topic` and `state` go together. Keys without a domain restriction only.',
    tag: 'Contacts',
    permission: 'full',
    query: listContactsQuerySchema,
    responses: { 200: { description: 'A page of contacts.', schema: listOf('Contact') } },
    errors: ['forbidden_domain', 'unknown_topic', 'not_found', 'invalid_cursor'],
  },
  {
    method: 'get',
    path: '/contacts/{id}',
    operationId: 'getContact',
    summary: 'Get a contact',
    tag: 'Contacts',
    params: contactParam,
    responses: { 200: { description: 'The contact.', schema: ref('Contact'), example } },
    errors: ['not_found'],
  },
  {
    method: 'post',
    path: '/contacts/{id}/subscriptions',
    operationId: 'changeContactSubscriptions',
    summary: "Change a contact's topic subscriptions",
    description: 'One change `{topic, state}` or `{subscriptions: [...]}` (1–50, each topic once); all or nothing. Test keys: 403.',
    tag: 'Contacts',
    params: contactParam,
    body: subscriptionsBody,
    requestExample: { topic: 'news', state: 'unsubscribed' },
    responses: { 200: { description: 'The contact after the change.', schema: ref('Contact') } },
    errors: ['test_key_not_allowed', 'not_found', 'unknown_topic'],
  },
  {
    method: 'delete',
    path: '/contacts/{id}',
    operationId: 'deleteContact',
    summary: 'Delete a contact',
    description: 'Removes the contact and its subscriptions (suppressions remain). Live FULL or ADMIN keys without a domain restriction.',
    tag: 'Contacts',
    permission: 'full',
    params: contactParam,
    responses: { 200: { description: 'The contact as it was.', schema: ref('DeletedContact'), example: { ...example, deleted: true } } },
    errors: ['test_key_not_allowed', 'forbidden_domain', 'not_found'],
  },
];
