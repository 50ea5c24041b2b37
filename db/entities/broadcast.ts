import { EntitySchema } from '@mikro-orm/core';

export type BroadcastStatus = 'queued' | 'sending' | 'sent' | 'canceled' | 'failed';

/**
 * One message to every eligible member of a segment (issue 18). Written by the API (creation,
 * cancel) and by the BroadcastFanOut activities (db/sql/broadcast-*.ts), each state change a
 * conditional update.
 */
export class Broadcast {
  id!: string;
  organizationId!: string;
  /** The key that created it: its messages are stored as that key's (mode, domain restriction). */
  apiKeyId!: string;
  segmentId!: string;
  name: string | null = null;
  from!: string;
  domainId!: string;
  topicId: string | null = null;
  kind!: string;
  subject: string | null = null;
  html: string | null = null;
  text: string | null = null;
  /** A published version, fixed at creation: every recipient gets the same one. */
  templateId: string | null = null;
  templateVersion: number | null = null;
  scheduledAt: Date | null = null;
  status: BroadcastStatus = 'queued';
  /** The frozen audience's size; null until the fan-out starts. */
  recipients: number | null = null;
  /** Fan-out cursor: recipients at positions below it went through the accept path. */
  enqueued = 0;
  /** Recipients whose data the template could not render with (no message for them). */
  renderFailures = 0;
  failure: string | null = null;
  /** Its fan-out run was started (the outbox mark). */
  enqueuedAt: Date | null = null;
  startedAt: Date | null = null;
  fannedOutAt: Date | null = null;
  finishedAt: Date | null = null;
  canceledAt: Date | null = null;
  createdAt!: Date;
  updatedAt!: Date;
}

export const BroadcastSchema = new EntitySchema<Broadcast>({
  class: Broadcast,
  tableName: 'broadcasts',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    apiKeyId: { type: 'uuid' },
    segmentId: { type: 'uuid' },
    name: { type: 'text', nullable: true },
    from: { type: 'text', fieldName: 'from_address' },
    domainId: { type: 'uuid' },
    topicId: { type: 'uuid', nullable: true },
    kind: { type: 'text' },
    subject: { type: 'text', nullable: true },
    html: { type: 'text', nullable: true, lazy: true },
    text: { type: 'text', nullable: true, lazy: true },
    templateId: { type: 'uuid', nullable: true },
    templateVersion: { type: 'integer', nullable: true },
    scheduledAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    status: { type: 'text' },
    recipients: { type: 'integer', nullable: true },
    enqueued: { type: 'integer' },
    renderFailures: { type: 'integer' },
    failure: { type: 'text', nullable: true },
    enqueuedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    startedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    fannedOutAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    finishedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    canceledAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
