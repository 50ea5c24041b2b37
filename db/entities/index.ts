import { OrganizationSchema } from './organization';
import { DomainSchema } from './domain';
import { ApiKeySchema, ApiKeyTokenSchema } from './api-key';
import { EmailSchema } from './email';
import { RecipientSchema } from './recipient';
import { EmailEventSchema } from './email-event';
import { AttachmentSchema } from './attachment';
import { SuppressionSchema } from './suppression';
import { AuditEntrySchema } from './audit-entry';
import { ContactSchema, SubscriptionSchema } from './contact';
import { TopicSchema } from './topic';
import { SegmentSchema } from './segment';
import { TemplateSchema, TemplateVersionSchema } from './template';
import { WebhookEndpointSchema, WebhookDeliverySchema } from './webhook';
import { BroadcastSchema } from './broadcast';
import { AutomationSchema, AutomationVersionSchema, AutomationRunSchema } from './automation';

export * from './organization';
export * from './domain';
export * from './api-key';
export * from './email';
export * from './recipient';
export * from './email-event';
export * from './attachment';
export * from './suppression';
export * from './audit-entry';
export * from './contact';
export * from './topic';
export * from './segment';
export * from './template';
export * from './webhook';
export * from './broadcast';
export * from './automation';

export const entities = [
  BroadcastSchema,
  AutomationSchema,
  AutomationVersionSchema,
  AutomationRunSchema,
  OrganizationSchema,
  DomainSchema,
  ApiKeySchema,
  ApiKeyTokenSchema,
  EmailSchema,
  RecipientSchema,
  EmailEventSchema,
  AttachmentSchema,
  SuppressionSchema,
  AuditEntrySchema,
  ContactSchema,
  SubscriptionSchema,
  TopicSchema,
  SegmentSchema,
  TemplateSchema,
  TemplateVersionSchema,
  WebhookEndpointSchema,
  WebhookDeliverySchema,
];
