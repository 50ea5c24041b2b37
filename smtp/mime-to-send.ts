import { createHash } from 'node:crypto';
import type { AddressObject, EmailAddress, ParsedMail } from 'mailparser';
import { validationError } from '../core/errors';
import { storable } from '../core/validate';
import { formatMailbox, parseAddrSpec } from '../core/emails/address';
import { DROPPED_HEADERS, RESERVED_HEADERS } from '../core/emails/schema';

/** What a relayed message asks for, in the shape of a `POST /emails` body. */
export interface RelayedSend {
  /** The body `prepareEmail` checks, exactly as if it had come over HTTP (the idempotency key as `idempotency_key`). */
  body: Record<string, unknown>;
  /** The key is the Message-ID's (not X-Svc-Idempotency-Key): a split delivery reuses it (smtp/relay.ts). */
  keyFromMessageId: boolean;
  /** Lower-cased envelope recipients: only they receive. */
  envelope: Set<string>;
}

/** The From header's domain is not the envelope sender's (550 5.7.1, smtp/replies.ts). */
export class SenderMismatch extends Error {}
/** Not a message: no header fields at all (554 5.6.0). */
export class Unparseable extends Error {}

/**
 * Headers a receiving server writes about the hops a message took and what it checked. The
 * service starts the message's journey, so such lines from the client's side are dropped rather
 * than passed on as if we had written them.
 */
const TRACE_HEADERS = new Set([
  'received',
  'x-received',
  'delivered-to',
  'x-original-to',
  'authentication-results',
  'arc-seal',
  'arc-message-signature',
  'arc-authentication-results',
  'received-spf',
]);

const FIELD = /^[!-9;-~]+[ \t]*:/;

/** The service's own instructions ride in these headers and are removed before sending. */
const SVC_PREFIX = 'x-svc-';
const MAX_KEY = 256;

/**
 * Maps a parsed relay message and its envelope to a send request (docs/smtp.md, "Mapping"):
 * - `from` is the From header (one mailbox), whose domain must be the MAIL FROM domain;
 * - `to` and `cc` are the headers; envelope recipients named in neither are `bcc`; only envelope
 *   recipients receive;
 * - `X-Svc-Kind`, `X-Svc-Tags` (`name=value; name=value`), `X-Svc-Idempotency-Key` become kind,
 *   tags and the idempotency key; every `X-Svc-*` header is removed;
 * - reserved headers are replaced by the service's own, List-Unsubscribe* and trace headers are
 *   dropped, and the rest are kept for `prepareEmail` to check under the API's header rules;
 * - the idempotency key is `smtp:<key_id>:<Message-ID>` when the message has a Message-ID.
 *
 * Throws a validation_error for what the API would refuse in the same words; the remaining
 * checks are prepareEmail's, on the body this returns.
 */
export function mimeToSend(mail: ParsedMail, envelope: { mailFrom: string; rcptTo: string[] }, keyId: string): RelayedSend {
  // RFC 5322 2.2: a field name is printable ASCII without colon, then a colon. Bytes that do not
  // start with such lines are not a message.
  if (mail.headerLines.length === 0 || mail.headerLines.some(({ line }) => !FIELD.test(line))) throw new Unparseable();

  const headers: [string, string][] = [];
  const seen = new Set<string>();
  const svc = new Map<string, string>();
  for (const { key, line } of mail.headerLines) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim();
    if (key.startsWith(SVC_PREFIX)) {
      if (svc.has(key)) throw validationError(`${name} appears more than once`, [{ field: name, message: 'given twice' }]);
      svc.set(key, unfold(line.slice(colon + 1)));
      continue;
    }
    if (RESERVED_HEADERS.has(key) || DROPPED_HEADERS.has(key) || TRACE_HEADERS.has(key)) continue;
    if (seen.has(key)) {
      throw validationError(`header ${name} appears more than once; the relay carries one value per header`, [
        { field: `headers.${name}`, message: 'given twice' },
      ]);
    }
    seen.add(key);
    headers.push([name, unfold(line.slice(colon + 1))]);
  }

  // A group is no mailbox, even a group of one.
  const fromList = hasGroup(mail.from) ? null : addresses(mail.from);
  if (fromList === null || fromList.length !== 1) {
    throw validationError('the From header must name exactly one mailbox', [{ field: 'from', message: 'exactly one mailbox' }]);
  }
  const from = fromList[0];
  const fromAddress = parseAddrSpec(from.address);
  if (fromAddress === null) throw validationError('from must be an email address', [{ field: 'from', message: 'not an address' }]);
  if (fromAddress.domain !== parseAddrSpec(envelope.mailFrom)?.domain) throw new SenderMismatch();

  const replyTo = addresses(mail.replyTo);
  if (replyTo !== null && replyTo.length !== 1) {
    throw validationError('the Reply-To header must name exactly one mailbox', [{ field: 'reply_to', message: 'exactly one mailbox' }]);
  }
  const to = addresses(mail.to) ?? [];
  const cc = addresses(mail.cc) ?? [];
  const named = new Set([...to, ...cc].map((a) => a.address.toLowerCase()));
  const rcpt = envelope.rcptTo.map((a) => a.toLowerCase());
  const bcc = envelope.rcptTo.filter((a, i) => !named.has(rcpt[i]));

  const body: Record<string, unknown> = {
    from: formatMailbox(from.name, from.address),
    to: to.map((a) => formatMailbox(a.name, a.address)),
    ...(cc.length ? { cc: cc.map((a) => formatMailbox(a.name, a.address)) } : {}),
    ...(bcc.length ? { bcc } : {}),
    ...(replyTo ? { reply_to: formatMailbox(replyTo[0].name, replyTo[0].address) } : {}),
    ...(mail.subject !== undefined ? { subject: mail.subject } : {}),
    // Only parts the message has: the parser is told not to derive one from the other.
    ...(mail.html ? { html: mail.html } : {}),
    ...(mail.text ? { text: mail.text } : {}),
    // fromEntries defines keys: a header named __proto__ stays a key, for the header rule to refuse.
    ...(headers.length ? { headers: Object.fromEntries(headers) } : {}),
    ...(svc.has('x-svc-kind') ? { kind: svc.get('x-svc-kind') } : {}),
    ...(svc.has('x-svc-tags') ? { tags: parseTags(svc.get('x-svc-tags')!) } : {}),
    ...idempotencyKey(svc.get('x-svc-idempotency-key'), mail.messageId, keyId),
    ...(mail.attachments.length
      ? {
          attachments: mail.attachments.map((a, i) => ({
            filename: a.filename || `attachment-${i + 1}`,
            content: a.content.toString('base64'),
            // A forwarded message or a nested multipart travels as an opaque file, as the API asks.
            content_type: /^(multipart|message)\//i.test(a.contentType) ? 'application/octet-stream' : a.contentType,
          })),
        }
      : {}),
  };

  // NUL survives MIME decoding but not PostgreSQL: the same refusal as a JSON body's.
  return {
    body: storable(body, { nul: true, surrogate: true }) as Record<string, unknown>,
    keyFromMessageId: !svc.has('x-svc-idempotency-key') && Boolean(mail.messageId),
    envelope: new Set(rcpt),
  };
}

/**
 * `idempotency_key` for the body: X-Svc-Idempotency-Key as given (the send schema checks it like
 * the API's), else `smtp:<key_id>:<Message-ID>`, else none.
 */
function idempotencyKey(given: string | undefined, messageId: string | undefined, keyId: string): { idempotency_key?: string } {
  if (given !== undefined) return { idempotency_key: given };
  if (!messageId) return {};
  const key = `smtp:${keyId}:${messageId}`;
  // A Message-ID too long for the schema's 256 characters is kept by its digest: still stable, still unique.
  return { idempotency_key: key.length <= MAX_KEY ? key : `smtp:${keyId}:sha256:${createHash('sha256').update(messageId).digest('hex')}` };
}

/** `name=value; name=value` (values may hold `=`; empty items are skipped). */
function parseTags(raw: string): { name: string; value: string }[] {
  return raw
    .split(';')
    .map((item) => item.trim())
    .filter((item) => item !== '')
    .map((item) => {
      const eq = item.indexOf('=');
      if (eq <= 0) {
        throw validationError('X-Svc-Tags must read "name=value; name=value"', [
          { field: 'X-Svc-Tags', message: `"${item}" is not name=value` },
        ]);
      }
      return { name: item.slice(0, eq).trim(), value: item.slice(eq + 1).trim() };
    });
}

/** RFC 5322 unfolding: a line break followed by white space is white space. */
const unfold = (value: string) => value.replace(/\r?\n(?=[ \t])/g, '').trim();

/** The mailboxes of an address header (group members flattened), or null when it is absent. */
function addresses(field: AddressObject | AddressObject[] | undefined): { name: string | null; address: string }[] | null {
  if (field === undefined) return null;
  const flat = (list: EmailAddress[]): EmailAddress[] => list.flatMap((a) => (a.group ? flat(a.group) : [a]));
  return (Array.isArray(field) ? field : [field])
    .flatMap((f) => flat(f.value))
    .map((a) => ({ name: a.name || null, address: a.address ?? '' }));
}

const hasGroup = (field: AddressObject | AddressObject[] | undefined) =>
  field !== undefined && (Array.isArray(field) ? field : [field]).some((f) => f.value.some((a) => a.group !== undefined));
