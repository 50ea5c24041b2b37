import { EVENT_TYPES } from '../../db/entities';
import { EMAIL_STATUSES } from '../../core/emails/status';
import { ERRORS } from '../../core/errors';
import { ref } from '../openapi/common';
import type { JsonSchema } from '../openapi/operation';

/** The response shapes of /emails (api/emails/present.ts and the send routes). */

const timestamp: JsonSchema = { type: 'string', format: 'date-time' };
const nullableTimestamp: JsonSchema = { type: ['string', 'null'], format: 'date-time' };
const id: JsonSchema = { type: 'string', format: 'uuid' };
const strings: JsonSchema = { type: 'array', items: { type: 'string' } };
const mode: JsonSchema = { type: 'string', enum: ['live', 'test'] };
const source: JsonSchema = {
  type: 'string',
  enum: ['api', 'smtp', 'broadcast', 'automation'],
  description: 'The ingress that accepted it: the API, the SMTP relay, a broadcast or an automation.',
};
const status: JsonSchema = { type: 'string', enum: [...EMAIL_STATUSES], description: 'The message status (docs/api.md, Message status).' };

/** `suppressed`: present only when suppressed recipients were dropped. */
const suppressed: JsonSchema = {
  type: 'array',
  items: { type: 'string' },
  minItems: 1,
  description: 'Recipients dropped because they are suppressed, as the caller wrote them; present only when some were.',
};

export const EmailEvent: JsonSchema = {
  type: 'object',
  properties: {
    type: { type: 'string', enum: [...EVENT_TYPES] },
    recipient: { type: 'string' },
    at: timestamp,
    bounce_type: { type: 'string', enum: ['hard', 'soft', 'undetermined'], description: 'Only on bounces.' },
    detail: { type: 'string', description: 'Only when present: a provider sub-type or failure text.' },
    url: { type: 'string', description: 'Only on clicks: the clicked URL.' },
  },
  required: ['type', 'recipient', 'at'],
  additionalProperties: false,
};

export const Email: JsonSchema = {
  type: 'object',
  properties: {
    object: { const: 'email' },
    id,
    from: { type: 'string', description: '`email` or `Name <email>`.' },
    to: strings,
    cc: strings,
    bcc: strings,
    reply_to: { type: ['string', 'null'] },
    subject: { type: 'string' },
    html: { type: ['string', 'null'] },
    text: { type: ['string', 'null'] },
    headers: { type: 'object', additionalProperties: { type: 'string' }, description: 'The extra headers the send asked for.' },
    tags: {
      type: 'array',
      items: {
        type: 'object',
        properties: { name: { type: 'string' }, value: { type: 'string' } },
        required: ['name', 'value'],
        additionalProperties: false,
      },
    },
    kind: { type: ['string', 'null'] },
    template: {
      description: 'The template and published version it was rendered from; null when none.',
      oneOf: [
        {
          type: 'object',
          properties: { id, version: { type: 'integer', minimum: 1 } },
          required: ['id', 'version'],
          additionalProperties: false,
        },
        { type: 'null' },
      ],
    },
    created_at: timestamp,
    scheduled_at: nullableTimestamp,
    sent_at: nullableTimestamp,
    last_event: status,
    waiting: {
      description:
        'Why a queued message is not leaving yet: held by a daily send cap (which one, and when its day turns), or refused for now by a ' +
        "recipient's MX (direct delivery: `deferred` until its next attempt, or `site_suspended` until its site's suspension ends, " +
        'with the last reply), or, while `sending`, refused for now by the SMTP relay (`relay_retry` until its run tries again, with the ' +
        'reply or the connection error); null when not held.',
      oneOf: [
        {
          type: 'object',
          properties: {
            reason: {
              type: 'string',
              enum: ['platform_daily_cap', 'organization_daily_cap', 'domain_daily_cap', 'deferred', 'site_suspended', 'relay_retry'],
            },
            until: timestamp,
            reply: {
              type: ['string', 'null'],
              description: 'The reply that deferred it (deferred, site_suspended, relay_retry); null for a cap.',
            },
          },
          required: ['reason', 'until', 'reply'],
          additionalProperties: false,
        },
        { type: 'null' },
      ],
    },
    mode,
    source,
    attachments: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          filename: { type: 'string' },
          content_type: { type: 'string' },
          size: { type: 'integer', minimum: 0, description: 'Bytes, decoded.' },
        },
        required: ['filename', 'content_type', 'size'],
        additionalProperties: false,
      },
    },
    events: { type: 'array', items: ref('EmailEvent'), description: 'In the order they were recorded.' },
  },
  required: [
    'object',
    'id',
    'from',
    'to',
    'cc',
    'bcc',
    'reply_to',
    'subject',
    'html',
    'text',
    'headers',
    'tags',
    'kind',
    'template',
    'created_at',
    'scheduled_at',
    'sent_at',
    'last_event',
    'waiting',
    'mode',
    'source',
    'attachments',
    'events',
  ],
  additionalProperties: false,
};

export const EmailSummary: JsonSchema = {
  type: 'object',
  properties: {
    object: { const: 'email' },
    id,
    from: { type: 'string' },
    to: strings,
    subject: { type: 'string' },
    last_event: status,
    mode,
    source,
    kind: { type: ['string', 'null'] },
    created_at: timestamp,
    sent_at: nullableTimestamp,
  },
  required: ['object', 'id', 'from', 'to', 'subject', 'last_event', 'mode', 'source', 'kind', 'created_at', 'sent_at'],
  additionalProperties: false,
};

export const SentEmail: JsonSchema = {
  type: 'object',
  properties: { id, suppressed },
  required: ['id'],
  additionalProperties: false,
};

/** One item of a batch's answer: stored (or replayed), or refused on its own. */
export const BatchItemResult: JsonSchema = {
  oneOf: [
    ref('SentEmail'),
    {
      type: 'object',
      properties: {
        error: {
          type: 'object',
          properties: { code: { type: 'string', enum: Object.keys(ERRORS) }, message: { type: 'string' } },
          required: ['code', 'message'],
          additionalProperties: false,
        },
      },
      required: ['error'],
      additionalProperties: false,
    },
  ],
};

export const BatchResult: JsonSchema = {
  type: 'object',
  properties: {
    data: { type: 'array', items: ref('BatchItemResult'), minItems: 1, description: 'One entry per item, in order.' },
  },
  required: ['data'],
  additionalProperties: false,
};

export const CanceledEmail: JsonSchema = {
  type: 'object',
  properties: { id, object: { const: 'email' }, status: { const: 'canceled' } },
  required: ['id', 'object', 'status'],
  additionalProperties: false,
};

export const schemas: Record<string, JsonSchema> = {
  Email,
  EmailEvent,
  EmailSummary,
  SentEmail,
  BatchItemResult,
  BatchResult,
  CanceledEmail,
};
