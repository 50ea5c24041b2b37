/**
 * The error catalogue: every code a client can see, declared once with its HTTP status. The API's
 * error middleware renders a ServiceError from it, the SMTP relay answers the same codes with
 * `smtp` (its reply code and enhanced status; smtp/replies.ts: a code without one is a 550 5.6.0
 * when the client caused it, a 451 4.3.0 when we did), and docs/api.md's table must list exactly
 * these (test/core/errors-catalogue.test.ts).
 */
export const ERRORS = {
  invalid_json: { status: 400, when: 'Body is not valid JSON, is empty where a body is required, or nests deeper than 64 levels.' },
  invalid_body: { status: 400, when: 'The request body could not be read (the connection broke mid-body).' },
  missing_api_key: { status: 401, when: 'No `Authorization: Bearer ...` header.' },
  invalid_api_key: { status: 401, when: 'Unknown, malformed, revoked or expired key.', smtp: '535 5.7.8' },
  forbidden: { status: 403, when: "The key's permission tier is too low (SEND < FULL < ADMIN)." },
  test_key_not_allowed: { status: 403, when: 'Test key on an ADMIN endpoint, or writing contacts and subscriptions.' },
  admin_key_not_mintable: { status: 403, when: '`POST /keys` with `permission: admin`, or rotating an ADMIN key.' },
  forbidden_domain: {
    status: 403,
    when: 'A domain-restricted key minting an unrestricted key, granting a domain it does not hold, adding or deleting a domain, listing or deleting contacts.',
  },
  not_found: {
    status: 404,
    when: "The resource is not in the key's organization (or, for a domain-restricted key, not of its domains). Never 403: ids of other organizations are not confirmed to exist.",
  },
  route_not_found: { status: 404, when: 'No such path.' },
  method_not_allowed: { status: 405, when: 'Known path, other method; `Allow` lists the methods.' },
  not_cancelable: {
    status: 409,
    when: 'Cancel after pick-up, or of a message in a final state; a broadcast already sent, canceled or failed; an automation run that already ended.',
  },
  domain_exists: { status: 409, when: '`POST /domains` with a name the organization already has (case and a trailing dot ignored).' },
  topic_exists: { status: 409, when: '`POST /topics` with a slug the organization already has.' },
  template_exists: { status: 409, when: 'Creating or renaming a template to a slug the organization already has.' },
  webhook_disabled: { status: 409, when: 'Retrying or recovering deliveries of a disabled webhook: enable it first.' },
  key_revoked: { status: 409, when: 'Rotating a revoked key.' },
  rotation_conflict: { status: 409, when: 'Rotating a key that another rotation superseded at the same moment.' },
  payload_too_large: { status: 413, when: 'Body over `MAX_BODY_BYTES` (40 MiB by default).', smtp: '552 5.3.4' },
  unsupported_media_type: {
    status: 415,
    when: 'A body without `Content-Type: application/json` (any case; a `charset` other than UTF-8 is refused too).',
  },
  validation_error: { status: 422, when: 'Unknown or invalid fields, limits, bad query parameters, timestamps out of range.' },
  reserved_header: { status: 422, when: 'A reserved header name in `headers`.' },
  template_variables: {
    status: 422,
    when: 'Template render error: a declared variable without a value or fallback, a value of the wrong type, a data key the template does not declare, or a rendered subject or body outside the send limits. `details` names each key.',
  },
  template_not_found: {
    status: 422,
    when: 'The template (id or slug) is missing, deleted or has no published version of that number; drafts never resolve.',
  },
  attachments_not_in_batch: { status: 422, when: 'Any item of a batch carries `attachments`: the whole batch is refused.' },
  invalid_cursor: { status: 422, when: 'A list cursor that is not a `next_cursor` we issued.' },
  unknown_topic: {
    status: 422,
    when: 'A topic slug that breaks the slug rule (contact upsert), or names no topic of the organization (subscriptions, segment filters, list filters, the `topic` of a bulk send).',
  },
  stream_mismatch: { status: 422, when: 'A bulk kind sent from a transactional-stream domain.' },
  domain_not_verified: {
    status: 422,
    when: 'Sender domain is not a verified domain of the organization allowed for the key (in a batch: inside the item).',
    smtp: '550 5.7.1',
  },
  contact_quota_exceeded: {
    status: 429,
    when: 'POST /events would create a contact beyond the daily new-contact quota (1,000 per organization and UTC day by default).',
  },
  run_quota_exceeded: {
    status: 429,
    when: 'POST /events would start automation runs beyond the daily run quota (5,000 per organization and UTC day by default).',
  },
  rate_limited: { status: 429, when: 'Per-key request rate spent for this second; `Retry-After: 1`.', smtp: '450 4.7.1' },
  internal_error: { status: 500, when: 'Our fault; the answer carries an `error_id` that is in the log line too.', smtp: '451 4.3.0' },
  starting: { status: 503, when: 'The service is still starting (database or engine not up yet); `Retry-After: 1`.', smtp: '451 4.3.0' },
} as const satisfies Record<string, { status: number; when: string; smtp?: `${2 | 4 | 5}${number} ${number}.${number}.${number}` }>;

export type ErrorCode = keyof typeof ERRORS;

export interface ErrorDetail {
  field: string;
  message: string;
}

/** An error a client caused or may see; transports render it by its code. */
export class ServiceError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'ServiceError';
    this.status = ERRORS[code].status;
  }
}

export const validationError = (message: string, details?: ErrorDetail[]) => new ServiceError('validation_error', message, details);
export const notFound = (what = 'resource') => new ServiceError('not_found', `${what} not found`);
