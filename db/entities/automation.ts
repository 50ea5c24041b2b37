import { EntitySchema } from '@mikro-orm/core';

export type AutomationTriggerType = 'event' | 'contact.created' | 'topic.subscribed';
export type AutomationRunStatus = 'running' | 'waiting' | 'completed' | 'canceled' | 'failed';

/**
 * An automation (issue 17): the latest definition's trigger in columns, for matching; the
 * definition itself is a version row (AutomationVersion). Written by the API only; runs read the
 * version they started with.
 */
export class Automation {
  id!: string;
  organizationId!: string;
  name!: string;
  enabled!: boolean;
  version!: number;
  triggerType!: AutomationTriggerType;
  /** The event name of an `event` trigger. */
  triggerEvent: string | null = null;
  /** The topic of a `topic.subscribed` trigger (resolved from its slug when defined). */
  triggerTopicId: string | null = null;
  /** The key that wrote the latest version: its sends are stored as that key's (mode, domains). */
  apiKeyId!: string;
  /** The latest version begins with a delay long enough to park (workflows/automation-run.ts): its seconds. */
  parkFirstSeconds: number | null = null;
  /** When it last became enabled: trigger rows older than that are not its concern. */
  enabledSince: Date | null = null;
  deletedAt: Date | null = null;
  createdAt!: Date;
  updatedAt!: Date;
}

export class AutomationVersion {
  automationId!: string;
  version!: number;
  /** core/automations/definition.ts's AutomationDefinition, with topics and templates as given. */
  definition!: Record<string, unknown>;
  apiKeyId!: string;
  createdAt!: Date;
}

/** One run of an automation for one contact and trigger occurrence (db/sql/automation-*.ts write it). */
export class AutomationRun {
  id!: string;
  organizationId!: string;
  automationId!: string;
  version!: number;
  contactId!: string;
  email!: string;
  dedupeKey!: string;
  trigger!: Record<string, unknown>;
  /** The event's data (and any resuming event's), overlaid on the contact's properties for send steps. */
  data!: Record<string, unknown>;
  status!: AutomationRunStatus;
  /** The path of the step in progress (`steps[2].then[0]`), null before the first and after the last. */
  step: string | null = null;
  history!: Record<string, unknown>[];
  reason: string | null = null;
  waitingEvent: string | null = null;
  waitDeadline: Date | null = null;
  resumed: Record<string, unknown> | null = null;
  wakeAt: Date | null = null;
  /** Parked in a long delay: started again (a new segment) at this time, after the step at `resumePath`. */
  resumeAt: Date | null = null;
  resumePath: string | null = null;
  segment = 0;
  startedAt: Date | null = null;
  createdAt!: Date;
  updatedAt!: Date;
  finishedAt: Date | null = null;
}

export const AutomationSchema = new EntitySchema<Automation>({
  class: Automation,
  tableName: 'automations',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    name: { type: 'text' },
    enabled: { type: 'boolean' },
    version: { type: 'integer' },
    triggerType: { type: 'text' },
    triggerEvent: { type: 'text', nullable: true },
    triggerTopicId: { type: 'uuid', nullable: true },
    apiKeyId: { type: 'uuid' },
    parkFirstSeconds: { type: 'integer', nullable: true },
    enabledSince: { type: 'Date', columnType: 'timestamptz', nullable: true },
    deletedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});

export const AutomationVersionSchema = new EntitySchema<AutomationVersion>({
  class: AutomationVersion,
  tableName: 'automation_versions',
  properties: {
    automationId: { type: 'uuid', primary: true },
    version: { type: 'integer', primary: true },
    definition: { type: 'json' },
    apiKeyId: { type: 'uuid' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});

export const AutomationRunSchema = new EntitySchema<AutomationRun>({
  class: AutomationRun,
  tableName: 'automation_runs',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    automationId: { type: 'uuid' },
    version: { type: 'integer' },
    contactId: { type: 'uuid' },
    email: { type: 'text' },
    dedupeKey: { type: 'text' },
    trigger: { type: 'json' },
    data: { type: 'json' },
    status: { type: 'text' },
    step: { type: 'text', nullable: true },
    history: { type: 'json' },
    reason: { type: 'text', nullable: true },
    waitingEvent: { type: 'text', nullable: true },
    waitDeadline: { type: 'Date', columnType: 'timestamptz', nullable: true },
    resumed: { type: 'json', nullable: true },
    wakeAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    resumeAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    resumePath: { type: 'text', nullable: true },
    segment: { type: 'integer' },
    startedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
    finishedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
  },
});
