import type { Stream } from '../../db/entities';

/**
 * Gmail's feedback loop aggregates spam reports by the Feedback-ID header's fields, read from the
 * right: a sender id (5 to 15 characters, the same on every message of the platform), then
 * narrower groups. Ours, broadest to narrowest: this service, the organization, the stream, the
 * message's kind. Never per message or per recipient: Gmail reports only groups with enough mail.
 */
export const FEEDBACK_SENDER_ID = 'svcmail';

/** `<kind>:<stream>:<organization id>:svcmail`; a `:` inside the kind (which allows it) becomes `.`. */
export const feedbackId = (kind: string, stream: Stream, organizationId: string): string =>
  `${kind.replace(/:/g, '.')}:${stream}:${organizationId}:${FEEDBACK_SENDER_ID}`;
