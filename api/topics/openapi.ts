import type { JsonSchema, Operation } from '../openapi/operation';
import { listOf, ref } from '../openapi/common';
import { SLUG_RE } from '../../core/contacts/rules';
import { listQuerySchema } from '../validate';
import { createTopicSchema, updateTopicSchema } from './schema';

/** OpenAPI operations of /topics (api/topics/routes.ts); responses as api/topics/present.ts answers them. */

const topicFields: Record<string, JsonSchema> = {
  object: { const: 'topic' },
  id: { type: 'string', format: 'uuid' },
  slug: { type: 'string', pattern: SLUG_RE.source },
  name: { type: 'string', minLength: 1, maxLength: 200 },
  default_opt_in: { type: 'boolean', description: 'True: a contact without a subscription row for the topic counts as subscribed.' },
  created_at: { type: 'string', format: 'date-time' },
};

const topicWith = (extra: Record<string, JsonSchema>): JsonSchema => ({
  type: 'object',
  properties: { ...topicFields, ...extra },
  required: [...Object.keys(topicFields), ...Object.keys(extra)],
  additionalProperties: false,
});

export const schemas: Record<string, JsonSchema> = {
  Topic: topicWith({}),
  DeletedTopic: topicWith({ deleted: { const: true } }),
};

const slugParam = { slug: { description: 'The topic slug.', schema: { type: 'string' } } };

const example = {
  object: 'topic',
  id: '0192f0c4-8a1e-7c3b-9a51-3f1d2b7c9e11',
  slug: 'news',
  name: 'News',
  default_opt_in: false,
  created_at: '2025-01-01T00:00:00.000Z',
};

export const operations: Operation[] = [
  {
    method: 'post',
    path: '/topics',
    operationId: 'createTopic',
    summary: 'Create a topic',
    description: '`name` defaults to the slug, `default_opt_in` to false.',
    tag: 'Topics',
    permission: 'admin',
    body: createTopicSchema,
    requestExample: { slug: 'news', name: 'News' },
    responses: { 201: { description: 'The topic.', schema: ref('Topic'), example } },
    errors: ['topic_exists'],
    links: {
      201: {
        GetTopic: { operationId: 'getTopic', parameters: { slug: '$response.body#/slug' } },
        UpdateTopic: { operationId: 'updateTopic', parameters: { slug: '$response.body#/slug' } },
        DeleteTopic: { operationId: 'deleteTopic', parameters: { slug: '$response.body#/slug' } },
      },
    },
  },
  {
    method: 'get',
    path: '/topics',
    operationId: 'listTopics',
    summary: 'List topics',
    tag: 'Topics',
    permission: 'admin',
    query: listQuerySchema,
    responses: { 200: { description: 'A page of topics, newest first.', schema: listOf('Topic') } },
    errors: ['invalid_cursor'],
  },
  {
    method: 'get',
    path: '/topics/{slug}',
    operationId: 'getTopic',
    summary: 'Get a topic',
    tag: 'Topics',
    permission: 'admin',
    params: slugParam,
    responses: { 200: { description: 'The topic.', schema: ref('Topic'), example } },
    errors: ['not_found'],
  },
  {
    method: 'patch',
    path: '/topics/{slug}',
    operationId: 'updateTopic',
    summary: 'Update a topic',
    description: 'The slug never changes.',
    tag: 'Topics',
    permission: 'admin',
    params: slugParam,
    body: updateTopicSchema,
    requestExample: { default_opt_in: true },
    responses: { 200: { description: 'The topic after the change.', schema: ref('Topic') } },
    errors: ['not_found'],
  },
  {
    method: 'delete',
    path: '/topics/{slug}',
    operationId: 'deleteTopic',
    summary: 'Delete a topic',
    description: 'Its subscription rows go with it.',
    tag: 'Topics',
    permission: 'admin',
    params: slugParam,
    responses: { 200: { description: 'The topic as it was.', schema: ref('DeletedTopic'), example: { ...example, deleted: true } } },
    errors: ['not_found'],
  },
];
