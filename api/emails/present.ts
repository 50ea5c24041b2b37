import type { Email, EmailEvent, Attachment } from '../../db/entities';
import type { EmailSummaryRow } from '../../db/sql/list-emails';

/** Entities carry Dates; raw list rows carry PostgreSQL's timestamp strings. */
const iso = (d: Date | string | null) => (d ? new Date(d).toISOString() : null);

export function presentEvent(e: EmailEvent) {
  return {
    type: e.type,
    recipient: e.recipient,
    at: e.at.toISOString(),
    ...(e.bounceType ? { bounce_type: e.bounceType } : {}),
    ...(e.detail ? { detail: e.detail } : {}),
    ...(e.url ? { url: e.url } : {}),
  };
}

export function presentEmail(email: Email, events: EmailEvent[], attachments: Attachment[]) {
  return {
    object: 'email',
    id: email.id,
    from: email.from,
    to: email.to,
    cc: email.cc,
    bcc: email.bcc,
    reply_to: email.replyTo,
    subject: email.subject,
    html: email.html,
    text: email.text,
    headers: email.headers,
    tags: email.tags,
    kind: email.kind,
    template: email.templateId !== null ? { id: email.templateId, version: email.templateVersion } : null,
    created_at: iso(email.createdAt),
    scheduled_at: iso(email.scheduledAt),
    sent_at: iso(email.sentAt),
    last_event: email.status,
    waiting: presentWaiting(email),
    mode: email.mode,
    source: email.source,
    attachments: attachments.map((a) => ({ filename: a.filename, content_type: a.contentType, size: a.size })),
    events: events.map(presentEvent),
  };
}

export function presentSummary(r: EmailSummaryRow) {
  return {
    object: 'email',
    id: r.id,
    from: r.from_address,
    to: r.to_addresses,
    subject: r.subject,
    last_event: r.status,
    mode: r.mode,
    source: r.source,
    kind: r.kind,
    created_at: iso(r.created_at),
    sent_at: iso(r.sent_at),
  };
}

/**
 * Why a message is not leaving yet. Queued (still cancelable): parked behind a daily cap (goes
 * out when the allowance returns), or refused for now by a recipient's MX (direct delivery: tried
 * again at `until`, or its site suspended until then), with the reply. Sending: the relay refused
 * it for now (a 4xx, or no connection) and its run tries again at `until` (null: no attempt left).
 */
function presentWaiting(email: Email): { reason: string; until: string | null; reply: string | null } | null {
  if (email.status === 'sending' && email.relayRefusals > 0 && email.relayRetryAt !== null) {
    return { reason: 'relay_retry', until: iso(email.relayRetryAt), reply: email.lastReply };
  }
  if (email.status !== 'queued') return null;
  if (email.waitingReason !== null) return { reason: email.waitingReason, until: iso(email.waitingUntil), reply: null };
  if (email.retryReason !== null) return { reason: email.retryReason, until: iso(email.retryAt), reply: email.lastReply };
  return null;
}
