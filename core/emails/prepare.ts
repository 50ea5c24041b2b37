import type { Tag } from '../../db/entities';
import { ServiceError, validationError } from '../errors';
import { isPlainObject, validate } from '../validate';
import { parseTimestamp } from '../time';
import { parseMailbox } from './address';
import { plainSendBody } from './plain-send';
import { parseTemplateRequest, type TemplateRequest } from '../templates/request';
import {
  sendEmailSchema,
  templatedSendSchema,
  MAX_SCHEDULE_PAST_MS,
  RESERVED_HEADERS,
  DROPPED_HEADERS,
  MAX_RECIPIENTS,
  MAX_ATTACHMENT_BYTES,
  MAX_SCHEDULE_AHEAD_MS,
  type SendEmailBody,
} from './schema';

/** A send request that passed every rule and is ready to be stored. */
export interface PreparedEmail {
  from: string;
  /** The sender's domain, lower-cased; the store statement checks it is a verified domain the key may use. */
  fromDomain: string;
  /** A bulk kind: the store statement requires a bulk-stream sender domain. */
  bulk: boolean;
  to: string[];
  cc: string[];
  bcc: string[];
  /** Unique lower-cased recipients with the field each came from. */
  recipients: { address: string; given: string; field: 'to' | 'cc' | 'bcc' }[];
  replyTo: string | null;
  /** With `template`, empty until the template renders (core/emails/render-templates.ts). */
  subject: string;
  html: string | null;
  text: string | null;
  /** The template to render the subject and bodies from; null once rendered, or for a plain send. */
  template: TemplateRequest | null;
  /** The template and published version the message was rendered from. */
  templateId: string | null;
  templateVersion: number | null;
  /** The version was resolved as the latest: the store statement checks it still is. */
  templateLatest: boolean;
  headers: Record<string, string>;
  tags: Tag[];
  kind: string | null;
  /** Topic slug of bulk mail (the store statement resolves it; unknown → unknown_topic). */
  topic: string | null;
  /** `track`: the store statement requires a verified tracking host on the sender domain. */
  trackOpens: boolean;
  trackClicks: boolean;
  /** Set by a broadcast's fan-out: its topic by id, and the broadcast each message belongs to. */
  topicId?: string | null;
  broadcastId?: string | null;
  scheduledAt: Date | null;
  idempotencyKey: string | null;
  attachments: { filename: string; contentType: string; content: Buffer }[];
}

/** Kinds that are bulk mail: one recipient each, unsubscribe headers, bulk-stream domains only. */
export const BULK_KIND_PREFIXES = ['bulk.', 'broadcast.', 'digest.', 'sequence.'];
export const isBulkKind = (kind: string | null) => kind !== null && BULK_KIND_PREFIXES.some((p) => kind.startsWith(p));

export interface PrepareOptions {
  inBatch: boolean;
  /** From the Idempotency-Key header; wins over the body's idempotency_key. */
  headerIdempotencyKey?: string;
  now: Date;
  /**
   * The SMTP envelope's recipients, lower-cased: only they receive. An address of `to` or `cc`
   * that is not among them stays in the header and gets nothing (mail "to" a list, sent to one).
   */
  envelope?: ReadonlySet<string>;
}

const asList = (v: string | string[] | undefined): string[] => (v === undefined ? [] : typeof v === 'string' ? [v] : v);

export function prepareEmail(input: unknown, opts: PrepareOptions): PreparedEmail {
  if (!isPlainObject(input)) throw validationError('each email must be a JSON object');
  let template: TemplateRequest | null = null;
  if (input.template !== undefined) {
    const clash = ['subject', 'html', 'text'].filter((k) => input[k] !== undefined);
    if (clash.length) {
      throw validationError(
        `template cannot be combined with ${clash.join(', ')}: the template renders them`,
        clash.map((k) => ({ field: k, message: 'not allowed with template' })),
      );
    }
    template = parseTemplateRequest(input.template);
  }
  if (isPlainObject(input.headers)) {
    const reserved = Object.keys(input.headers).filter((h) => RESERVED_HEADERS.has(h.toLowerCase()));
    if (reserved.length > 0) {
      throw new ServiceError(
        'reserved_header',
        `reserved header(s) cannot be set: ${reserved.join(', ')}`,
        reserved.map((h) => ({ field: `headers.${h}`, message: `${h} is set by the service` })),
      );
    }
  }
  const body: SendEmailBody =
    plainSendBody(input, template !== null) ??
    (template ? (validate(templatedSendSchema, input) as SendEmailBody) : validate(sendEmailSchema, input));
  if (template === null && body.html === undefined && body.text === undefined) {
    throw validationError('html or text (or both) is required', [{ field: 'html', message: 'html or text is required' }]);
  }

  const to = asList(body.to);
  const cc = asList(body.cc);
  const bcc = asList(body.bcc);
  if (to.length === 0) throw validationError('to must name at least one recipient', [{ field: 'to', message: 'at least one recipient' }]);
  // Over SMTP only the envelope receives: header addresses beyond it are names, not recipients.
  if ((opts.envelope?.size ?? to.length + cc.length + bcc.length) > MAX_RECIPIENTS) {
    throw validationError(`to, cc and bcc together may name at most ${MAX_RECIPIENTS} addresses`, [
      { field: 'to', message: `more than ${MAX_RECIPIENTS} recipients` },
    ]);
  }
  const recipients: PreparedEmail['recipients'] = [];
  const seen = new Set<string>();
  for (const [field, list] of [
    ['to', to],
    ['cc', cc],
    ['bcc', bcc],
  ] as const) {
    for (const s of list) {
      const p = parseMailbox(s)!;
      if (seen.has(p.normalized) || (opts.envelope && !opts.envelope.has(p.normalized))) continue;
      seen.add(p.normalized);
      recipients.push({ address: p.normalized, given: p.address, field });
    }
  }

  const tags = (body.tags ?? []) as Tag[];
  let kind = body.kind ?? null;
  if (kind === null) {
    const tagKind = tags.find((t) => t.name === 'kind');
    if (tagKind) {
      if (tagKind.value.length === 0 || tagKind.value.length > 64) {
        throw validationError('the kind tag must be 1 to 64 characters', [
          { field: 'tags', message: 'kind tag value must be 1 to 64 characters' },
        ]);
      }
      kind = tagKind.value;
    }
  }
  if (isBulkKind(kind) && recipients.length !== 1) {
    throw validationError(`kind ${kind} is bulk mail and needs exactly one recipient`, [
      { field: 'to', message: 'bulk kinds need exactly one recipient' },
    ]);
  }

  const trackOpens = body.track?.opens === true;
  const trackClicks = body.track?.clicks === true;
  if ((trackOpens || trackClicks) && recipients.length !== 1) {
    throw validationError('track needs exactly one recipient: opens and clicks are recorded per message', [
      { field: 'track', message: 'tracking needs exactly one recipient' },
    ]);
  }
  if (body.topic !== undefined && !isBulkKind(kind)) {
    throw validationError('topic is for bulk kinds (bulk., broadcast., digest., sequence.): only they carry an unsubscribe link', [
      { field: 'topic', message: 'needs a bulk kind' },
    ]);
  }

  let scheduledAt: Date | null = null;
  if (body.scheduled_at !== undefined) {
    scheduledAt = parseTimestamp(body.scheduled_at, { requireOffset: true })!;
    const ahead = scheduledAt.getTime() - opts.now.getTime();
    if (ahead > MAX_SCHEDULE_AHEAD_MS) {
      throw validationError('scheduled_at may be at most 30 days ahead', [{ field: 'scheduled_at', message: 'at most 30 days ahead' }]);
    }
    if (ahead < -MAX_SCHEDULE_PAST_MS) {
      throw validationError('scheduled_at may be at most 5 minutes in the past (a clock skew); omit it to send now', [
        { field: 'scheduled_at', message: 'more than 5 minutes in the past' },
      ]);
    }
  }

  const attachments: PreparedEmail['attachments'] = [];
  let total = 0;
  for (const a of body.attachments ?? []) {
    const content = Buffer.from(a.content.replace(/\s+/g, ''), 'base64');
    total += content.length;
    attachments.push({ filename: a.filename, contentType: a.content_type ?? 'application/octet-stream', content });
  }
  if (total > MAX_ATTACHMENT_BYTES) {
    throw validationError(`attachments may total at most ${MAX_ATTACHMENT_BYTES} bytes after decoding`, [
      { field: 'attachments', message: 'over 10 MiB decoded' },
    ]);
  }

  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(body.headers ?? {})) if (!DROPPED_HEADERS.has(k.toLowerCase())) headers[k] = v;

  const from = parseMailbox(body.from)!;

  return {
    from: body.from.trim(),
    fromDomain: from.domain.toLowerCase(),
    bulk: isBulkKind(kind),
    to,
    cc,
    bcc,
    recipients,
    replyTo: body.reply_to?.trim() ?? null,
    subject: body.subject ?? '',
    html: body.html ?? null,
    text: body.text ?? null,
    template,
    templateId: null,
    templateVersion: null,
    templateLatest: false,
    headers,
    tags,
    kind,
    topic: body.topic ?? null,
    trackOpens,
    trackClicks,
    scheduledAt,
    idempotencyKey: opts.inBatch ? (body.idempotency_key ?? null) : (opts.headerIdempotencyKey ?? body.idempotency_key ?? null),
    attachments,
  };
}
