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
    // Parked behind a daily cap: still queued (cancelable), goes out when the allowance returns.
    waiting:
      email.status === 'queued' && email.waitingReason !== null ? { reason: email.waitingReason, until: iso(email.waitingUntil) } : null,
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
