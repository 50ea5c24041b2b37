import type { JsonSchema, Operation } from '../openapi/operation';
import { listOf, ref } from '../openapi/common';
import { MAX_CONDITIONS, statusCondition, topicCondition } from '../../core/segments/filter';
import { yupToJsonSchema } from '../openapi/yup-json-schema';
import { withFields } from '../contacts/openapi-bodies';
import { listQuerySchema } from '../validate';
import { createSegmentSchema } from './schema';

/** OpenAPI operations of /segments (api/segments/routes.ts); responses as api/segments/present.ts and the delete route answer them. */

/**
 * A filter as parseSegmentFilter (core/segments/filter.ts) checks it: exactly `{all: [...]}`, each
 * condition by its yup schema (`topic` present: the topic condition, else the status one). Saved and
 * answered as given.
 */
const segmentFilter: JsonSchema = {
  type: 'object',
  description: 'Every condition must hold, on the effective state (the explicit row, else the topic default).',
  properties: {
    all: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_CONDITIONS,
      items: { oneOf: [yupToJsonSchema(statusCondition), yupToJsonSchema(topicCondition)] },
    },
  },
  required: ['all'],
  additionalProperties: false,
};

const segmentFields: Record<string, JsonSchema> = {
  object: { const: 'segment' },
  id: { type: 'string', format: 'uuid' },
  name: { type: 'string', minLength: 1, maxLength: 200 },
  filter: ref('SegmentFilter'),
  created_at: { type: 'string', format: 'date-time' },
};

const segmentWith = (extra: Record<string, JsonSchema>): JsonSchema => ({
  type: 'object',
  properties: { ...segmentFields, ...extra },
  required: [...Object.keys(segmentFields), ...Object.keys(extra)],
  additionalProperties: false,
});

export const schemas: Record<string, JsonSchema> = {
  SegmentFilter: segmentFilter,
  Segment: segmentWith({ contact_count: { type: 'integer', minimum: 0, description: 'Counted when the segment is read.' } }),
  DeletedSegment: segmentWith({ deleted: { const: true } }),
};

const idParam = { id: { description: 'The segment id.', schema: { type: 'string' } } };

const example = {
  object: 'segment',
  id: '0192f0c4-8a1e-7c3b-9a51-3f1d2b7c9e13',
  name: 'News readers',
  filter: { all: [{ status: 'SUBSCRIBED' }, { topic: 'news', state: 'SUBSCRIBED' }] },
  contact_count: 42,
  created_at: '2025-01-01T00:00:00.000Z',
};

export const operations: Operation[] = [
  {
    method: 'post',
    path: '/segments',
    operationId: 'createSegment',
    summary: 'Create a segment',
    description: `\`filter\`: \`{all: [condition, ...]}\` with 1 to ${MAX_CONDITIONS} conditions, each \`{status}\` or \`{topic, state}\` (upper-case values). A topic the organization does not have: 422 \`unknown_topic\`.`,
    tag: 'Segments',
    permission: 'admin',
    body: withFields(createSegmentSchema, { filter: segmentFilter }),
    requestExample: { name: example.name, filter: example.filter },
    responses: { 201: { description: 'The segment, counted.', schema: ref('Segment'), example } },
    errors: ['unknown_topic'],
    links: {
      201: {
        GetSegment: { operationId: 'getSegment', parameters: { id: '$response.body#/id' } },
        DeleteSegment: { operationId: 'deleteSegment', parameters: { id: '$response.body#/id' } },
        ListSegmentContacts: { operationId: 'listContacts', parameters: { segment_id: '$response.body#/id' } },
      },
    },
  },
  {
    method: 'get',
    path: '/segments',
    operationId: 'listSegments',
    summary: 'List segments',
    tag: 'Segments',
    permission: 'admin',
    query: listQuerySchema,
    responses: { 200: { description: 'A page of segments, newest first, each counted now.', schema: listOf('Segment') } },
    errors: ['invalid_cursor'],
  },
  {
    method: 'get',
    path: '/segments/{id}',
    operationId: 'getSegment',
    summary: 'Get a segment',
    tag: 'Segments',
    permission: 'admin',
    params: idParam,
    responses: { 200: { description: 'The segment, counted now.', schema: ref('Segment'), example } },
    errors: ['not_found'],
  },
  {
    method: 'delete',
    path: '/segments/{id}',
    operationId: 'deleteSegment',
    summary: 'Delete a segment',
    tag: 'Segments',
    permission: 'admin',
    params: idParam,
    responses: {
      200: {
        description: 'The segment as it was (without a count).',
        schema: ref('DeletedSegment'),
        example: {
          object: 'segment',
          id: example.id,
          name: example.name,
          filter: example.filter,
          created_at: example.created_at,
          deleted: true,
        },
      },
    },
    errors: ['not_found'],
  },
];
