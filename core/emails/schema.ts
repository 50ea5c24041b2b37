import * as yup from 'yup';
import { parseMailbox } from './address';
import { parseTimestamp } from '../time';
import { isPlainObject, NO_LINE_BREAKS } from '../validate';

export const MAX_RECIPIENTS = 50;
/** The most messages one batch request carries (spec, Limits → Batch); a batch reserves as much of its key's rate before its body is read. */
export const MAX_BATCH = 100;
export const MAX_BODY_PART_BYTES = 2_000_000;
export const MAX_ATTACHMENTS = 10;
export const MAX_ATTACHMENT_BYTES = 10 * 1024 * 1024;
/** The spec leaves the horizon open; like Resend we accept schedules up to 30 days ahead. */
export const MAX_SCHEDULE_AHEAD_MS = 30 * 24 * 3600 * 1000;
/** A schedule this far in the past is a clock skew and sends at once; further back it is a mistake (422). */
export const MAX_SCHEDULE_PAST_MS = 5 * 60 * 1000;

export const RESERVED_HEADERS = new Set(
  [
    'Message-ID',
    'Feedback-ID',
    'Return-Path',
    'DKIM-Signature',
    'From',
    'To',
    'Cc',
    'Bcc',
    'Reply-To',
    'Sender',
    'Subject',
    'Date',
    'MIME-Version',
    'Content-Type',
    'Content-Transfer-Encoding',
    'Content-ID',
    'Content-Disposition',
  ].map((h) => h.toLowerCase()),
);
/** Dropped silently: the service owns unsubscribe headers. */
export const DROPPED_HEADERS = new Set(['list-unsubscribe', 'list-unsubscribe-post']);

// A flat character class: a grouped pattern backtracks through megabytes of content and overflows the stack.
const BASE64_CHARS = /^[A-Za-z0-9+/]*={0,2}$/;
const isBase64 = (s: string) => s.length % 4 === 0 && BASE64_CHARS.test(s);
const MIME_TYPE =
  /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}(\s*;\s*[A-Za-z0-9!#$&^_.+-]+=("[^"\r\n]*"|[A-Za-z0-9!#$&^_.+-]+))*$/;

export const address = () =>
  yup
    .string()
    .strict()
    .test('address', '${path} must be an email address or "Name <email>"', (v) => v === undefined || parseMailbox(v) !== null);

const addressList = (label: string) =>
  yup
    .mixed<string | string[]>()
    .test('address-list', `${label} must be an email address (or "Name <email>"), or an array of them, one address each`, (v) => {
      if (v === undefined) return true;
      const list = typeof v === 'string' ? [v] : v;
      return Array.isArray(list) && list.every((s) => typeof s === 'string' && parseMailbox(s) !== null);
    });

/** An html or text part: at most 2 MB of UTF-8 (sends and template drafts). */
export const bodyPart = (label: string) =>
  yup
    .string()
    .strict()
    .test(
      'size',
      `${label} must be at most ${MAX_BODY_PART_BYTES} bytes`,
      (v) => v === undefined || v === null || Buffer.byteLength(v, 'utf8') <= MAX_BODY_PART_BYTES,
    );

export const tagSchema = yup
  .object({
    name: yup.string().strict().required().min(1).max(64).matches(NO_LINE_BREAKS, '${path} must not contain line breaks'),
    value: yup.string().strict().required().max(256).matches(NO_LINE_BREAKS, '${path} must not contain line breaks'),
  })
  .noUnknown(true, '${path} has unknown field(s): ${unknown}')
  .strict();

export const attachmentSchema = yup
  .object({
    filename: yup.string().strict().required().min(1).max(255).matches(NO_LINE_BREAKS, '${path} must not contain line breaks'),
    content: yup
      .string()
      .strict()
      .required()
      .test('base64', '${path} must be base64', (v) => v === undefined || isBase64(v.replace(/\s+/g, ''))),
    content_type: yup
      .string()
      .strict()
      .max(255)
      .matches(MIME_TYPE, '${path} must be a MIME type such as application/pdf')
      // Containers are not leaf parts: multipart/* would need its own boundaries and message/* may not be base64-encoded.
      .test(
        'leaf',
        '${path} cannot be multipart/* or message/*; send such a file as application/octet-stream',
        (v) => v === undefined || !/^(multipart|message)\//i.test(v.trim()),
      ),
  })
  .noUnknown(true, '${path} has unknown field(s): ${unknown}')
  .strict();

/** A message class (sends and broadcasts). */
export const kindField = () =>
  yup
    .string()
    .strict()
    .min(1)
    .max(64)
    .matches(/^[A-Za-z0-9_.:-]+$/, 'kind may contain only A-Z, a-z, 0-9, _ . : -');

/** An ISO 8601 time with an offset (the range is checked where it is used). */
export const scheduledAtField = () =>
  yup
    .string()
    .strict()
    .test(
      'iso',
      'scheduled_at must be an ISO 8601 timestamp with an offset, e.g. 2026-01-01T09:00:00Z',
      (v) => v === undefined || parseTimestamp(v, { requireOffset: true }) !== null,
    );

export const sendEmailSchema = yup
  .object({
    from: address().required(),
    to: addressList('to').required('to is required'),
    cc: addressList('cc'),
    bcc: addressList('bcc'),
    reply_to: address(),
    subject: yup.string().strict().required().min(1).max(998).matches(NO_LINE_BREAKS, 'subject must not contain line breaks'),
    html: bodyPart('html'),
    text: bodyPart('text'),
    headers: yup
      .mixed<Record<string, string>>()
      .test(
        'headers',
        'headers must be an object of string values',
        (v) => v === undefined || (isPlainObject(v) && Object.values(v).every((x) => typeof x === 'string')),
      )
      .test(
        'header-names',
        'header names may contain only A-Z, a-z, 0-9 and -',
        (v) => !isPlainObject(v) || Object.keys(v).every((k) => /^[A-Za-z0-9-]{1,100}$/.test(k)),
      )
      .test(
        'header-values',
        'header values must be at most 1000 characters without line breaks',
        (v) => !isPlainObject(v) || Object.values(v).every((x) => typeof x !== 'string' || (x.length <= 1000 && NO_LINE_BREAKS.test(x))),
      ),
    tags: yup.array().strict().of(tagSchema).max(20),
    kind: kindField(),
    scheduled_at: scheduledAtField(),
    idempotency_key: yup.string().strict().min(1).max(256),
    attachments: yup.array().strict().of(attachmentSchema).max(MAX_ATTACHMENTS),
    template: yup.mixed(),
    track: yup
      .object({ opens: yup.boolean().strict(), clicks: yup.boolean().strict() })
      .noUnknown(true, 'track has unknown field(s): ${unknown}')
      .strict()
      .default(undefined),
    // An extension of the spec's fields: the topic a bulk message is about (its unsubscribe link
    // leaves that topic only). Broadcasts set it from their own `topic`.
    topic: yup.string().strict().min(1).max(64),
  })
  .noUnknown(true, 'unknown field(s): ${unknown}')
  .strict();

/** A send with `template`: the template renders the subject and bodies (prepareEmail refuses them beside it). */
export const templatedSendSchema = sendEmailSchema.omit(['subject', 'html', 'text']);

export type SendEmailBody = yup.InferType<typeof sendEmailSchema>;
