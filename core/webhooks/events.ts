import type { EventType } from '../../db/entities/email-event';

/** The 12 per-recipient message event types (spec, Events 1), in the order of the spec. */
const MESSAGE_EVENTS: Record<EventType, true> = {
  queued: true,
  sent: true,
  delivered: true,
  delivery_delayed: true,
  bounced: true,
  complained: true,
  rejected: true,
  opened: true,
  clicked: true,
  unsubscribed: true,
  suppressed: true,
  failed: true,
};

/**
 * Every event a webhook can receive: `email.<type>` for each message event, then the audience and
 * domain events. The fan-out triggers name them the same way; docs/webhooks.md lists each with an
 * example payload (test/api/webhooks.test.ts keeps the two in step).
 */
export const WEBHOOK_EVENTS: readonly string[] = [
  ...Object.keys(MESSAGE_EVENTS).map((t) => `email.${t}`),
  'contact.created',
  'contact.updated',
  'contact.deleted',
  'domain.verified',
];

const KNOWN = new Set(WEBHOOK_EVENTS);
export const isWebhookEvent = (name: string) => KNOWN.has(name);
