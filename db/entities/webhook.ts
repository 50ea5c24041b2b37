import { EntitySchema } from '@mikro-orm/core';

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

/**
 * An organization's webhook receiver. Deliveries are added by the fan-out triggers (their
 * functions and payloads: db/sql/webhook-payloads.ts), never by code: every writer of an event
 * gets them for free.
 */
export class WebhookEndpoint {
  id!: string;
  organizationId!: string;
  url!: string;
  description: string | null = null;
  /** Event names it receives; null: all of them. */
  events: string[] | null = null;
  enabled = true;
  /** Why it was disabled: `api` (PATCH), `gone` (410), `failing` (5 days of failures). */
  disabledReason: string | null = null;
  /** Sealed with SECRETS_KEY; shown once, never read back through the API. */
  secretEnc!: string;
  previousSecretEnc: string | null = null;
  previousSecretUntil: Date | null = null;
  failingSince: Date | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
}

export const WebhookEndpointSchema = new EntitySchema<WebhookEndpoint>({
  class: WebhookEndpoint,
  tableName: 'webhook_endpoints',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    url: { type: 'text' },
    description: { type: 'text', nullable: true },
    events: { type: 'string[]', columnType: 'text[]', nullable: true },
    enabled: { type: 'boolean' },
    disabledReason: { type: 'text', nullable: true },
    secretEnc: { type: 'text', lazy: true },
    previousSecretEnc: { type: 'text', nullable: true, lazy: true },
    previousSecretUntil: { type: 'Date', columnType: 'timestamptz', nullable: true },
    failingSince: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});

/** One event to one endpoint, and the outbox row of its WebhookDelivery workflow. */
export class WebhookDelivery {
  id!: string;
  organizationId!: string;
  endpointId!: string;
  eventId!: string;
  eventType!: string;
  status: DeliveryStatus = 'pending';
  attempts = 0;
  run = 1;
  /** Attempts in the current run: 0 means the dispatcher gives it a batched first attempt. */
  runAttempts = 0;
  lastStatusCode: number | null = null;
  lastError: string | null = null;
  lastResponse: string | null = null;
  nextAttemptAt: Date | null = null;
  enqueuedAt: Date | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
}

export const WebhookDeliverySchema = new EntitySchema<WebhookDelivery>({
  class: WebhookDelivery,
  tableName: 'webhook_deliveries',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    endpointId: { type: 'uuid' },
    eventId: { type: 'bigint' },
    eventType: { type: 'text' },
    status: { type: 'text' },
    attempts: { type: 'integer' },
    run: { type: 'integer' },
    runAttempts: { type: 'integer' },
    lastStatusCode: { type: 'integer', nullable: true },
    lastError: { type: 'text', nullable: true },
    lastResponse: { type: 'text', nullable: true },
    nextAttemptAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    enqueuedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
