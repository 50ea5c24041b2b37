import type { Broadcast } from '../../db/entities';
import type { BroadcastProgressRow } from '../../db/sql/broadcast-progress';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/**
 * The broadcast object. `status` is `sent` once the fan-out is done and none of its messages is
 * still waiting to leave (until then `sending`, caps delaying the tail included).
 */
export function presentBroadcast(b: Broadcast, progress: BroadcastProgressRow | undefined, topicSlug: string | null) {
  const p = {
    queued: progress?.queued ?? 0,
    sent: progress?.sent ?? 0,
    delivered: progress?.delivered ?? 0,
    bounced: progress?.bounced ?? 0,
    complained: progress?.complained ?? 0,
    unsubscribed: progress?.unsubscribed ?? 0,
    suppressed: progress?.suppressed ?? 0,
    // Recipients whose data the template could not render with got no message: failed too.
    failed: (progress?.failed ?? 0) + b.renderFailures,
    canceled: progress?.canceled ?? 0,
  };
  const sent = b.status === 'sending' && b.fannedOutAt !== null && p.queued === 0;
  return {
    object: 'broadcast',
    id: b.id,
    name: b.name,
    segment_id: b.segmentId,
    from: b.from,
    topic: topicSlug,
    kind: b.kind,
    subject: b.templateId ? null : b.subject,
    template: b.templateId ? { id: b.templateId, version: b.templateVersion } : null,
    status: sent ? 'sent' : b.status,
    recipients: b.recipients,
    progress: p,
    failure: b.failure,
    scheduled_at: iso(b.scheduledAt),
    created_at: iso(b.createdAt),
    started_at: iso(b.startedAt),
    enqueued_at: iso(b.fannedOutAt),
    canceled_at: iso(b.canceledAt),
  };
}
