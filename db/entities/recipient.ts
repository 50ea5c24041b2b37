import { EntitySchema } from '@mikro-orm/core';

export type RecipientField = 'to' | 'cc' | 'bcc';
/**
 * pending → in_flight → sent/delivered/bounced/failed. `in_flight` is committed before the SMTP
 * transaction starts, so a retry knows which recipients may already have been handed over.
 */
export type RecipientState =
  | 'pending'
  | 'in_flight'
  | 'sent'
  | 'delivered'
  | 'bounced'
  | 'failed'
  | 'complained'
  | 'rejected'
  /** Dropped at acceptance because the address is on the suppression list. */
  | 'suppressed';

export class Recipient {
  id!: string;
  emailId!: string;
  address!: string;
  field!: RecipientField;
  state: RecipientState = 'pending';
  attempts = 0;
  updatedAt: Date = new Date();
}

export const RecipientSchema = new EntitySchema<Recipient>({
  class: Recipient,
  tableName: 'recipients',
  properties: {
    id: { type: 'uuid', primary: true },
    emailId: { type: 'uuid' },
    address: { type: 'text' },
    field: { type: 'text' },
    state: { type: 'text' },
    attempts: { type: 'integer' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
