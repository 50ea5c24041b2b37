import { EntitySchema } from '@mikro-orm/core';
import type { KeyMode } from './api-key';
import type { Stream } from './domain';

/** Which daily allowance a parked message waits for (core/limits/caps.ts). */
export type WaitingReason = 'platform_daily_cap' | 'organization_daily_cap' | 'domain_daily_cap';
/** Why a message a recipient's MX refused for now waits (direct delivery): its backoff, or its site's suspension. */
export type RetryReason = 'deferred' | 'site_suspended';

/**
 * A message's status, the API's `last_event` (spec, Email status), in the spec's order: the one
 * list. It is declared here, beside the column, because db/ sits below core/; core/emails/status.ts
 * exports it with the rules over it, and every other user (the list filter of GET /emails, the
 * statements) takes it from there or from here.
 */
export const EMAIL_STATUSES = [
  'queued',
  'sending',
  'sent',
  'delivered',
  'bounced',
  'complained',
  'failed',
  'suppressed',
  'canceled',
  'unconfirmed',
] as const;

export type EmailStatus = (typeof EMAIL_STATUSES)[number];

export type EmailSource = 'api' | 'smtp' | 'broadcast' | 'automation';

export interface Tag {
  name: string;
  value: string;
}

export class Email {
  id!: string;
  organizationId!: string;
  apiKeyId!: string;
  domainId!: string;
  from!: string;
  to!: string[];
  cc: string[] = [];
  bcc: string[] = [];
  replyTo: string | null = null;
  subject!: string;
  html: string | null = null;
  text: string | null = null;
  headers: Record<string, string> = {};
  tags: Tag[] = [];
  kind: string | null = null;
  /** The broadcast it is one message of (issue 18). */
  broadcastId: string | null = null;
  /** The topic a bulk message is about: its unsubscribe link leaves that topic only (issue 16). */
  topicId: string | null = null;
  /** Open pixel and click redirects through the sender domain's tracking host. */
  trackOpens = false;
  trackClicks = false;
  mode!: KeyMode;
  /** The ingress that accepted it: the REST API or the SMTP relay. */
  source: EmailSource = 'api';
  status!: EmailStatus;
  scheduledAt: Date | null = null;
  /** The template and published version it was rendered from (kept when the template is deleted). */
  templateId: string | null = null;
  templateVersion: number | null = null;
  /** Generated once at acceptance so every attempt sends the very same message. */
  messageId!: string;
  idempotencyKey: string | null = null;
  /** Set once the workflow was started; a replay re-queues a message that lacks it. */
  enqueuedAt: Date | null = null;
  /** When its SendEmail run's timer handed a scheduled message back to the outbox (Temporal); never a second timer run. */
  handedBackAt: Date | null = null;
  /** The sender domain's stream at acceptance: the outbox claims each stream on its own. */
  stream: Stream = 'transactional';
  /** The UTC day (YYYY-MM-DD) whose daily allowances this message took. */
  reservedOn: string | null = null;
  /** Parked behind a daily cap (still `queued`): which one, and when its day turns. */
  waitingReason: WaitingReason | null = null;
  waitingUntil: Date | null = null;
  /** Waiting for its next attempt (direct delivery; still `queued`, out of the outbox until retry_at). */
  retryReason: RetryReason | null = null;
  retryAt: Date | null = null;
  /** The last reply that deferred it. */
  lastReply: string | null = null;
  /** How many times an MX refused it for now: its backoff step. */
  deferrals = 0;
  /** How many times the relay refused it for now (its run retries it, still `sending`). */
  relayRefusals = 0;
  /** When its run tries the relay again (null: not waiting on the relay, or no attempt left). */
  relayRetryAt: Date | null = null;
  sentAt: Date | null = null;
  /** The workflow that claimed it for delivery (db/sql/claim-delivery.ts). */
  claimedBy: string | null = null;
  /** The workflow id of the run the outbox started it on (worker/stranded-runs.ts). */
  startedRun: string | null = null;
  createdAt!: Date;
  updatedAt!: Date;
}

export const EmailSchema = new EntitySchema<Email>({
  class: Email,
  tableName: 'emails',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    apiKeyId: { type: 'uuid' },
    domainId: { type: 'uuid' },
    from: { type: 'text', fieldName: 'from_address' },
    to: { type: 'json', fieldName: 'to_addresses' },
    cc: { type: 'json', fieldName: 'cc_addresses' },
    bcc: { type: 'json', fieldName: 'bcc_addresses' },
    replyTo: { type: 'text', nullable: true },
    subject: { type: 'text' },
    html: { type: 'text', nullable: true, lazy: true },
    text: { type: 'text', nullable: true, lazy: true },
    headers: { type: 'json' },
    tags: { type: 'json' },
    kind: { type: 'text', nullable: true },
    broadcastId: { type: 'uuid', nullable: true },
    topicId: { type: 'uuid', nullable: true },
    trackOpens: { type: 'boolean' },
    trackClicks: { type: 'boolean' },
    mode: { type: 'text' },
    source: { type: 'text' },
    status: { type: 'text' },
    scheduledAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    templateId: { type: 'uuid', nullable: true },
    templateVersion: { type: 'integer', nullable: true },
    messageId: { type: 'text' },
    idempotencyKey: { type: 'text', nullable: true },
    enqueuedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    handedBackAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    stream: { type: 'text' },
    reservedOn: { type: 'string', columnType: 'date', nullable: true },
    waitingReason: { type: 'text', nullable: true },
    waitingUntil: { type: 'Date', columnType: 'timestamptz', nullable: true },
    retryReason: { type: 'text', nullable: true },
    retryAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    lastReply: { type: 'text', nullable: true },
    deferrals: { type: 'integer' },
    relayRefusals: { type: 'integer' },
    relayRetryAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    sentAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    claimedBy: { type: 'text', nullable: true },
    startedRun: { type: 'text', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
