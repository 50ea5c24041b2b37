import type { WebhookDelivery, WebhookEndpoint } from '../../db/entities';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function presentWebhook(w: WebhookEndpoint) {
  return {
    object: 'webhook',
    id: w.id,
    url: w.url,
    description: w.description,
    events: w.events,
    enabled: w.enabled,
    ...(w.enabled ? {} : { disabled_reason: w.disabledReason }),
    created_at: iso(w.createdAt),
    updated_at: iso(w.updatedAt),
  };
}

export function presentDelivery(d: WebhookDelivery) {
  return {
    object: 'webhook_delivery',
    id: d.id,
    webhook_id: d.endpointId,
    event_type: d.eventType,
    status: d.status,
    attempts: d.attempts,
    last_status_code: d.lastStatusCode,
    last_error: d.lastError,
    last_response: d.lastResponse,
    next_attempt_at: d.status === 'pending' ? iso(d.nextAttemptAt) : null,
    created_at: iso(d.createdAt),
  };
}
