import { NO_LINE_BREAKS, isPlainObject } from '../validate';
import { parseMailbox } from './address';
import { MAX_BODY_PART_BYTES, type SendEmailBody } from './schema';

/**
 * The common send body checked without yup: answers the body when it certainly passes
 * sendEmailSchema (core/emails/schema.ts), or with `templated` templatedSendSchema (the same
 * without subject, html and text, and with `template`), null when it may not, and then the schema
 * checks it and names what fails. yup was a fifth of the API process's CPU while accepting batches (profiled,
 * docs/performance.md): its rules run through promises-like test runners and allocate per field.
 *
 * Only the fields most sends carry are checked here, each by the schema's own rules: from, to, cc,
 * bcc, reply_to (one mailbox each, parseMailbox), subject (1 to 998 characters, one line), html and
 * text (strings of at most MAX_BODY_PART_BYTES), idempotency_key (1 to 256 characters), kind (1 to
 * 64 of A-Z a-z 0-9 _ . : -) and tags (at most 20 of exactly {name: 1 to 64, value: 1 to 256
 * characters, one line each}). A body with any other field, or a value of another type (null
 * included), goes to the schema. With a strict schema yup answers the body itself, unchanged, so
 * answering it here is the same. test/core/plain-send.test.ts holds the two to the same answers.
 */
export function plainSendBody(input: Record<string, unknown>, templated = false): SendEmailBody | null {
  // from, to and (without a template) subject.
  let required = templated ? 4 : 0;
  for (const key in input) {
    if (!Object.hasOwn(input, key)) return null;
    const v = input[key];
    switch (key) {
      case 'from':
        if (!mailbox(v)) return null;
        required |= 1;
        break;
      case 'to':
        if (!mailboxes(v)) return null;
        required |= 2;
        break;
      case 'cc':
      case 'bcc':
        if (!mailboxes(v)) return null;
        break;
      case 'reply_to':
        if (!mailbox(v)) return null;
        break;
      case 'template':
        // Any value but null (the schema's `mixed`): parseTemplateRequest has checked it.
        if (!templated || v === null) return null;
        break;
      case 'subject':
        if (templated || !line(v, 1, 998)) return null;
        required |= 4;
        break;
      case 'html':
      case 'text':
        if (templated) return null;
        if (typeof v !== 'string' || (v.length * 3 > MAX_BODY_PART_BYTES && Buffer.byteLength(v, 'utf8') > MAX_BODY_PART_BYTES))
          return null;
        break;
      case 'idempotency_key':
        if (typeof v !== 'string' || v.length < 1 || v.length > 256) return null;
        break;
      case 'kind':
        if (typeof v !== 'string' || v.length < 1 || v.length > 64 || !KIND.test(v)) return null;
        break;
      case 'tags':
        if (!tags(v)) return null;
        break;
      default:
        return null;
    }
  }
  return required === 7 ? (input as SendEmailBody) : null;
}

const KIND = /^[A-Za-z0-9_.:-]+$/;

const mailbox = (v: unknown): boolean => typeof v === 'string' && parseMailbox(v) !== null;

function mailboxes(v: unknown): boolean {
  if (typeof v === 'string') return parseMailbox(v) !== null;
  if (!Array.isArray(v)) return false;
  for (const s of v) if (!mailbox(s)) return false;
  return true;
}

/** A string of `min` to `max` characters without line breaks. */
const line = (v: unknown, min: number, max: number): boolean =>
  typeof v === 'string' && v.length >= min && v.length <= max && NO_LINE_BREAKS.test(v);

function tags(v: unknown): boolean {
  if (!Array.isArray(v) || v.length > 20) return false;
  for (const t of v) {
    if (!isPlainObject(t)) return false;
    let n = 0;
    for (const key in t) {
      if (key !== 'name' && key !== 'value') return false;
      n++;
    }
    if (n !== 2 || !line(t.name, 1, 64) || !line(t.value, 1, 256)) return false;
  }
  return true;
}
