import { MAX_BATCH, sendEmailSchema, templatedSendSchema } from '../../core/emails/schema';
import { listOf, ref } from '../openapi/common';
import type { JsonSchema, Operation } from '../openapi/operation';
import { yupToJsonSchema } from '../openapi/yup-json-schema';
import { listEmailsQuerySchema } from './schema';

export { schemas } from './openapi-schemas';

/** OpenAPI operations of /emails (api/emails/routes.ts); responses as api/emails/present.ts and the routes answer them. */

const emailParam = {
  id: { description: 'The message id (from the send).', schema: { type: 'string', format: 'uuid' } as JsonSchema },
};

const exampleId = '0192f0c4-8a1e-7c3b-9a51-3f1d2b7c9e10';
const sendExample = {
  from: 'Acme <hello@mail.example.com>',
  to: ['ann@example.com'],
  subject: 'Your receipt',
  html: '<p>Thanks for your order.</p>',
  tags: [{ name: 'kind', value: 'receipt' }],
};

const emailLinks = {
  GetEmail: { operationId: 'getEmail', parameters: { id: '$response.body#/id' } },
  CancelEmail: { operationId: 'cancelEmail', parameters: { id: '$response.body#/id' } },
};

/** The errors a send body can earn beyond validation_error (core/emails/prepare.ts, core/emails/accept.ts, the templates). */
const sendErrors = [
  'reserved_header',
  'template_variables',
  'template_not_found',
  'domain_not_verified',
  'stream_mismatch',
  'unknown_topic',
] as const;

/**
 * The send body, as the send path checks it (core/emails/prepare.ts): with `template`, by
 * templatedSendSchema (no subject, html or text); without, by sendEmailSchema. `omit`: fields a
 * transport refuses beside them (a batch's `attachments`, refused whole: 422 attachments_not_in_batch).
 */
function sendBody(omit: 'attachments'[]): JsonSchema {
  const plain = yupToJsonSchema(sendEmailSchema.omit(['template', ...omit]));
  const templated = yupToJsonSchema(templatedSendSchema.omit(omit));
  const properties = templated.properties as Record<string, JsonSchema>;
  return {
    oneOf: [
      { ...plain, description: 'A message with its own subject and bodies (html or text, or both).' },
      {
        ...templated,
        description: 'A message rendered from a template: `subject`, `html` and `text` come from it.',
        properties: {
          ...properties,
          template: {
            ...properties.template,
            type: 'object',
            description:
              '`id` or `slug` (exactly one), `version` (a published number or `latest`, the default) and `data` (the variables).',
          },
        },
        required: [...((templated.required as string[] | undefined) ?? []), 'template'],
      },
    ],
  };
}

export const operations: Operation[] = [
  {
    method: 'post',
    path: '/emails',
    operationId: 'sendEmail',
    tag: 'Emails',
    summary: 'Send an email',
    description:
      'Queues one message. `template` (an object `{id or slug, version?, data?}`) replaces `subject`, `html` and `text`; without it `html` or `text` is required. ' +
      'A replayed idempotency key (the `Idempotency-Key` header, or `idempotency_key` in the body; the header wins) answers the original id with `Idempotent-Replayed: true` and sends nothing.',
    headers: {
      'Idempotency-Key': {
        description:
          'Makes the send safe to retry: a key the organization used already answers the message it stored. Wins over the body field.',
        schema: { type: 'string', minLength: 1, maxLength: 256 },
      },
    },
    body: { json: sendBody([]) },
    requestExample: sendExample,
    responses: {
      200: {
        description: 'Stored (or replayed): its id, and the suppressed recipients dropped when there were any.',
        schema: ref('SentEmail'),
        headers: {
          'Idempotent-Replayed': {
            description: 'Only on a replay of an idempotency key: `true`, and nothing was sent again.',
            schema: { type: 'string', enum: ['true'] },
          },
        },
        example: { id: exampleId },
      },
    },
    errors: [...sendErrors],
    links: { 200: emailLinks },
  },
  {
    method: 'post',
    path: '/emails/batch',
    operationId: 'sendBatch',
    tag: 'Emails',
    summary: 'Send up to 100 emails',
    description:
      `A JSON array of 1 to ${MAX_BATCH} send bodies without attachments, processed in order: a failing item does not stop the rest, ` +
      'and answers its own `error` in its place. Each item may carry its own `idempotency_key`; the `Idempotency-Key` header is not applied. ' +
      'The request costs one unit of the key rate per item.',
    // Items are checked one by one and refused in their place of the answer (200), never the whole
    // request: the document can hold the request only to what refuses it whole (an array of 1 to
    // 100, no item with attachments). Each item's shape is the send body's (sendEmail).
    body: {
      json: {
        type: 'array',
        minItems: 1,
        maxItems: MAX_BATCH,
        items: {
          not: { type: 'object', required: ['attachments'] },
          description:
            'A send body as `POST /emails` takes it, without `attachments` (one item with them refuses the whole batch). ' +
            'An item that is not a valid send body is refused alone: its place in the answer holds its `error`.',
          examples: [sendExample],
        },
      },
    },
    requestExample: [sendExample, { ...sendExample, to: 'bob@example.com' }],
    responses: {
      200: {
        description: 'One entry per item, in order: `{id}` (plus `suppressed`), or `{error: {code, message}}`.',
        schema: ref('BatchResult'),
        example: {
          data: [
            { id: exampleId },
            { error: { code: 'domain_not_verified', message: 'example.org is not a verified domain of this organization' } },
          ],
        },
      },
    },
    errors: ['attachments_not_in_batch'],
    links: { 200: { GetFirstEmail: { operationId: 'getEmail', parameters: { id: '$response.body#/data/0/id' } } } },
  },
  {
    method: 'get',
    path: '/emails/{id}',
    operationId: 'getEmail',
    tag: 'Emails',
    summary: 'Retrieve an email',
    description:
      'The message with its bodies, headers, attachment metadata and events. A domain-restricted key sees only its domains’ mail.',
    params: emailParam,
    responses: {
      200: {
        description: 'The message.',
        schema: ref('Email'),
        example: {
          object: 'email',
          id: exampleId,
          from: 'Acme <hello@mail.example.com>',
          to: ['ann@example.com'],
          cc: [],
          bcc: [],
          reply_to: null,
          subject: 'Your receipt',
          html: '<p>Thanks for your order.</p>',
          text: null,
          headers: {},
          tags: [{ name: 'kind', value: 'receipt' }],
          kind: 'receipt',
          template: null,
          created_at: '2025-01-01T00:00:00.000Z',
          scheduled_at: null,
          sent_at: '2025-01-01T00:00:01.000Z',
          last_event: 'delivered',
          waiting: null,
          mode: 'live',
          source: 'api',
          attachments: [],
          events: [
            { type: 'queued', recipient: 'ann@example.com', at: '2025-01-01T00:00:00.000Z' },
            { type: 'delivered', recipient: 'ann@example.com', at: '2025-01-01T00:00:01.000Z' },
          ],
        },
      },
    },
    errors: ['not_found'],
  },
  {
    method: 'get',
    path: '/emails',
    operationId: 'listEmails',
    tag: 'Emails',
    summary: 'List emails',
    description: 'Newest first, keyset-paginated; `since` is inclusive, `until` exclusive; `to` matches any recipient, any case.',
    query: listEmailsQuerySchema,
    responses: {
      200: {
        description: 'A page of message summaries.',
        schema: listOf('EmailSummary'),
        example: {
          object: 'list',
          data: [
            {
              object: 'email',
              id: exampleId,
              from: 'Acme <hello@mail.example.com>',
              to: ['ann@example.com'],
              subject: 'Your receipt',
              last_event: 'delivered',
              mode: 'live',
              source: 'api',
              kind: 'receipt',
              created_at: '2025-01-01T00:00:00.000Z',
              sent_at: '2025-01-01T00:00:01.000Z',
            },
          ],
        },
      },
    },
    errors: ['invalid_cursor'],
  },
  {
    method: 'post',
    path: '/emails/{id}/cancel',
    operationId: 'cancelEmail',
    tag: 'Emails',
    summary: 'Cancel a queued email',
    description: 'Only while the message is queued (scheduled, or held by a daily cap); after pick-up: 409 `not_cancelable`.',
    params: emailParam,
    responses: {
      200: { description: 'Canceled.', schema: ref('CanceledEmail'), example: { id: exampleId, object: 'email', status: 'canceled' } },
    },
    errors: ['not_found', 'not_cancelable'],
  },
];
