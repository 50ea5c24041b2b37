import { WEBHOOK_EVENT_TYPES } from '../../db/sql/webhook-payloads';

/**
 * Every event a webhook can receive: `email.<type>` for each message event (EVENT_TYPES,
 * db/entities/email-event.ts, in the order of the spec), then the audience and domain events.
 *
 * The events and their payloads are made in the database, by the fan-out triggers' PL/pgSQL
 * functions, whose SQL is db/sql/webhook-payloads.ts (installed by the migration
 * Migration20261208000000_webhook_payloads); the names below are the ones those functions give.
 * docs/webhooks.md lists each with an example payload (test/api/webhooks.test.ts keeps the two in
 * step).
 */
export const WEBHOOK_EVENTS: readonly string[] = WEBHOOK_EVENT_TYPES;

const KNOWN = new Set(WEBHOOK_EVENTS);
export const isWebhookEvent = (name: string) => KNOWN.has(name);
