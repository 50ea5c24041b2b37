import { EntitySchema } from '@mikro-orm/core';

/**
 * The per-recipient message event types (spec, Events 1), in the order of the spec, and `canceled`: the one list,
 * which the webhooks' `email.<type>` names (core/webhooks/events.ts) follow. How a row is written:
 * db/sql/email-events.ts.
 */
export const EVENT_TYPES = [
  'queued',
  'sent',
  'delivered',
  'delivery_delayed',
  'bounced',
  'complained',
  'rejected',
  'opened',
  'clicked',
  'unsubscribed',
  'suppressed',
  'failed',
  // Not in the spec's list: a recipient's message canceled before it left (issue 51; Resend's email.canceled).
  'canceled',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

export class EmailEvent {
  id!: string;
  emailId!: string;
  organizationId!: string;
  type!: EventType;
  recipient!: string;
  at: Date = new Date();
  bounceType: 'hard' | 'soft' | 'undetermined' | null = null;
  detail: string | null = null;
  url: string | null = null;
}

export const EmailEventSchema = new EntitySchema<EmailEvent>({
  class: EmailEvent,
  tableName: 'email_events',
  properties: {
    id: { type: 'bigint', primary: true, autoincrement: true },
    emailId: { type: 'uuid' },
    organizationId: { type: 'uuid' },
    type: { type: 'text' },
    recipient: { type: 'text' },
    at: { type: 'Date', columnType: 'timestamptz' },
    bounceType: { type: 'text', nullable: true },
    detail: { type: 'text', nullable: true },
    url: { type: 'text', nullable: true },
  },
});
