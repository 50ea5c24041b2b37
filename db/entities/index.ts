import { OrganizationSchema } from './organization';
import { DomainSchema } from './domain';
import { ApiKeySchema, ApiKeyTokenSchema } from './api-key';
import { EmailSchema } from './email';
import { RecipientSchema } from './recipient';
import { EmailEventSchema } from './email-event';
import { AttachmentSchema } from './attachment';
import { SuppressionSchema } from './suppression';
import { AuditEntrySchema } from './audit-entry';

export * from './organization';
export * from './domain';
export * from './api-key';
export * from './email';
export * from './recipient';
export * from './email-event';
export * from './attachment';
export * from './suppression';
export * from './audit-entry';

export const entities = [
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
];
