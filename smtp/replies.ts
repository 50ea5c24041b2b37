import { ERRORS, type ServiceError } from '../core/errors';

/** One SMTP reply: the basic code, the enhanced status (RFC 3463) and the text. */
export interface SmtpReply {
  code: number;
  enhanced: string;
  text: string;
}

/**
 * The relay's own replies, the ones no API error code stands behind. The reply to a send the
 * API would refuse comes from the catalogue instead (replyForError).
 */
export const RELAY_REPLIES = {
  /** AUTH on a plain connection while SMTP_RELAY_ALLOW_INSECURE is off. */
  startTlsFirst: { code: 538, enhanced: '5.7.11', text: 'encryption required: issue STARTTLS before AUTH' },
  /** MAIL FROM before AUTH. */
  authRequired: { code: 530, enhanced: '5.7.0', text: 'authentication required: AUTH with an API key as the password' },
  /** The key already holds SMTP_RELAY_MAX_CONNECTIONS_PER_KEY connections. */
  tooManyConnections: { code: 454, enhanced: '4.7.0', text: 'too many connections for this API key; retry later' },
  /** The From header's domain is not the envelope sender's. */
  senderMismatch: { code: 550, enhanced: '5.7.1', text: "the From header's domain must be the MAIL FROM domain" },
  /** RCPT TO an address the service does not send to (the API's address rule). */
  badRecipient: { code: 553, enhanced: '5.1.3', text: 'not an address the service sends to (local@domain, no IP literal)' },
  /** The bytes after DATA are not a message (no header fields) or the parser gave up on them. */
  unparseable: { code: 554, enhanced: '5.6.0', text: 'message could not be parsed' },
} as const satisfies Record<string, SmtpReply>;

/** The inbound (bounce and feedback) listener's replies; it advertises no ENHANCEDSTATUSCODES, so the text carries them. */
export const INBOUND_REPLIES = {
  /** Not `bounces+<valid token>` or `complaints` at the return-path host of a live domain. */
  unknownRecipient: { code: 550, enhanced: '5.1.1', text: 'no such bounce or feedback address' },
  tooManyRecipients: { code: 452, enhanced: '4.5.3', text: 'too many recipients' },
  /** The database did not take the message: the sender keeps it and tries again. */
  storeFailed: { code: 451, enhanced: '4.3.0', text: 'temporary failure storing the message; try again later' },
} as const satisfies Record<string, SmtpReply>;

/**
 * The reply to a send refused with an API error: the code's `smtp` in the catalogue, else 550
 * 5.6.0 for what the client caused (validation in all its forms) and 451 4.3.0 for our own
 * faults, which a client retries; the API's code leads the text so the two read alike.
 */
export function replyForError(err: ServiceError): SmtpReply {
  const declared: string | undefined = (ERRORS[err.code] as { smtp?: string }).smtp;
  const [code, enhanced] = declared ? declared.split(' ') : err.status >= 500 ? ['451', '4.3.0'] : ['550', '5.6.0'];
  const details = err.details?.length ? ` (${err.details.map((d) => `${d.field}: ${d.message}`).join('; ')})` : '';
  return { code: Number(code), enhanced, text: `${err.code}: ${err.message}${details}` };
}

/** An Error smtp-server turns into the reply (`responseCode`; the enhanced status leads the text). */
export function replyError(reply: SmtpReply): Error & { responseCode: number } {
  // RFC 5321 4.5.3.1.5: a reply line is at most 512 octets; details of a long refusal are cut.
  const text = reply.text.length > MAX_REPLY_TEXT ? `${reply.text.slice(0, MAX_REPLY_TEXT - 3)}...` : reply.text;
  return Object.assign(new Error(`${reply.enhanced} ${text}`), { responseCode: reply.code });
}

const MAX_REPLY_TEXT = 400;

/** Text that carries its own enhanced status code (RFC 3463): `x.y.z ...`. */
export const OWN_ENHANCED_STATUS = /^[245]\.\d{1,3}\.\d{1,3} /;
