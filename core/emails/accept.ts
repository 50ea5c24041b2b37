import type { Orm } from '../../db/orm';
import type { EmailSource } from '../../db/entities';
import { uuidv7 } from '../../db/ids';
import { findIdempotencyReplays } from '../../db/sql/idempotency-replays';
import { ServiceError, validationError } from '../errors';
import type { StoreResult } from '../../db/sql/store-emails';
import { invalidKey, rateLimited } from '../auth';
import type { PreparedEmail } from './prepare';
import type { GroupStore, StoreRequest } from './group-store';

/** The error of a message the store statement refused for its sender domain or topic. */
function refusal(code: Exclude<StoreResult['refused'][number]['code'], 'template_changed'>, item: PreparedEmail): ServiceError {
  switch (code) {
    case 'domain_not_verified':
      return new ServiceError(
        'domain_not_verified',
        `${item.fromDomain} is not a verified domain of this organization allowed for this key`,
      );
    case 'stream_mismatch':
      return new ServiceError('stream_mismatch', `kind ${item.kind} is bulk mail; ${item.fromDomain} is a transactional-stream domain`);
    case 'unknown_topic':
      return new ServiceError('unknown_topic', `topic ${item.topic} is not a topic of this organization`, [
        { field: 'topic', message: 'no such topic' },
      ]);
    case 'tracking_host':
      return validationError(
        `track needs a verified tracking host on ${item.fromDomain} (PATCH /domains/:id tracking_host, then its CNAME)`,
        [{ field: 'track', message: 'the sender domain has no verified tracking host' }],
      );
  }
}

/** A send request whose authentication rides on the statement that stores it: only its token's hash. */
export interface Credentials {
  tokenHash: string;
}

/** What the store statement authenticates: a request's token, or (a broadcast's fan-out) the key that created it. */
export type StoreCredentials = Credentials | { keyId: string };

/**
 * The message was rendered from a template version that, by the time the store statement ran, was
 * deleted or no longer the latest it was resolved as: nothing was stored, and the caller renders
 * it again (core/emails/submit.ts).
 */
export const TEMPLATE_CHANGED = Symbol('template_changed');
export type AcceptResult = Accepted | ServiceError | typeof TEMPLATE_CHANGED;

export interface Accepted {
  id: string;
  suppressed: string[];
  replayed: boolean;
}

export interface AcceptDeps {
  orm: Orm;
  /** Stores send requests in groups, one statement each (see GroupStore). */
  store: GroupStore;
  /** Wakes the outbox dispatcher, which starts the workflows of stored messages. */
  dispatch: () => void;
}

export interface AcceptOptions {
  /** What the store statement charges the key's window (one per single send; 0 when prepaid). */
  cost: number;
  /** The request already paid (a batch's reservation): admitted without a charge. */
  prepaid?: boolean;
  /** The ingress that accepted the messages (default `api`); the one thing GET /emails shows apart. */
  source?: EmailSource;
}

/**
 * Authenticates the request and stores its prepared messages (the outbox) in one statement shared
 * with concurrent requests (see GroupStore), then wakes the dispatcher that starts their
 * workflows. Throws 401 or 429 when the key is unknown or over its rate; answers each item with
 * its stored id, a replay of an earlier message with the same idempotency key, or its own error
 * (the sender domain).
 *
 * Idempotency keys are unique per organization in the database, so concurrent duplicates resolve
 * to one message. A replay of a message stored but never queued queues it.
 */
export async function acceptEmails(
  deps: AcceptDeps,
  credentials: StoreCredentials,
  items: PreparedEmail[],
  opts: AcceptOptions,
): Promise<AcceptResult[]> {
  const results: AcceptResult[] = new Array(items.length);
  const now = new Date();
  const emails: StoreRequest['emails'] = [];
  const recipients: StoreRequest['recipients'] = [];
  const attachments: StoreRequest['attachments'] = [];
  /** Index of the item that claimed each idempotency key in this request. */
  const claimed = new Map<string, number>();
  const byId = new Map<string, number>();

  items.forEach((item, index) => {
    const key = item.idempotencyKey;
    if (key !== null) {
      if (claimed.has(key)) return; // the same key twice in one batch: a replay of the earlier item
      claimed.set(key, index);
    }
    const id = uuidv7(now.getTime());
    byId.set(id, index);
    // Fields at their default (empty, null, false) are left out: the store statement reads a missing
    // field as null and stores the default, and a broadcast sends this row for every recipient
    // (measured: 6% less CPU per stored message, in PostgreSQL's JSON parse and Node's stringify).
    const row: StoreRequest['emails'][number] = {
      id,
      at: now.toISOString(),
      from_domain: item.fromDomain,
      bulk: item.bulk,
      from_address: item.from,
      to_addresses: item.to,
      subject: item.subject,
      html: item.html,
      text: item.text,
      kind: item.kind,
      idempotency_key: key,
      source: opts.source ?? 'api',
    };
    if (item.cc.length) row.cc_addresses = item.cc;
    if (item.bcc.length) row.bcc_addresses = item.bcc;
    if (item.replyTo !== null) row.reply_to = item.replyTo;
    if (Object.keys(item.headers).length) row.headers = item.headers;
    if (item.tags.length) row.tags = item.tags;
    if (item.topic !== null) row.topic = item.topic;
    if (item.topicId) row.given_topic_id = item.topicId;
    if (item.broadcastId) row.broadcast_id = item.broadcastId;
    if (item.trackOpens) row.track_opens = true;
    if (item.trackClicks) row.track_clicks = true;
    if (item.scheduledAt) row.scheduled_at = item.scheduledAt.toISOString();
    if (item.templateId !== null) {
      row.template_id = item.templateId;
      row.template_version = item.templateVersion;
      row.template_latest = item.templateLatest;
    }
    emails.push(row);
    for (const r of item.recipients) recipients.push({ id: uuidv7(), email_id: id, address: r.address, field: r.field });
    item.attachments.forEach((a, position) => {
      attachments.push({
        id: uuidv7(),
        email_id: id,
        position,
        filename: a.filename,
        content_type: a.contentType,
        size: a.content.length,
        content: a.content.toString('base64'),
      });
    });
  });

  const row = await deps.store.store({
    tokenHash: 'tokenHash' in credentials ? credentials.tokenHash : null,
    ...('keyId' in credentials ? { keyId: credentials.keyId } : {}),
    cost: opts.cost,
    prepaid: opts.prepaid ?? false,
    emails,
    recipients,
    attachments,
  });
  if (!row.known || row.organizationId === null) throw invalidKey();
  if (!row.admitted) throw rateLimited(row.rateLimit);

  let wake = false;
  for (const s of row.stored) {
    const index = byId.get(s.id)!;
    const dropped = new Set(s.suppressed);
    results[index] = {
      id: s.id,
      suppressed: items[index].recipients.filter((r) => dropped.has(r.address)).map((r) => r.given),
      replayed: false,
    };
    if (s.status === 'queued') wake = true;
  }
  for (const f of row.refused) {
    const item = items[byId.get(f.id)!];
    results[byId.get(f.id)!] = f.code === 'template_changed' ? TEMPLATE_CHANGED : refusal(f.code, item);
  }

  // Items the insert skipped hold a key that another message (earlier, or concurrent) already took.
  const taken = [...claimed].filter(([, index]) => results[index] === undefined).map(([key]) => key);
  if (taken.length > 0) {
    const prior = await findIdempotencyReplays(deps.orm, row.organizationId, taken);
    for (const p of prior) {
      results[claimed.get(p.idempotency_key)!] = { id: p.id, suppressed: [], replayed: true };
      if (p.enqueued_at === null) wake = true;
    }
  }

  items.forEach((item, index) => {
    if (results[index] === undefined) {
      const first = item.idempotencyKey !== null ? results[claimed.get(item.idempotencyKey)!] : undefined;
      if (!first) throw new Error(`message ${index} of the request was neither stored nor found by its idempotency key`);
      results[index] =
        first instanceof ServiceError || first === TEMPLATE_CHANGED ? first : { id: first.id, suppressed: [], replayed: true };
    }
  });
  if (wake) deps.dispatch();
  return results;
}
