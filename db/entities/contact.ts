import { EntitySchema } from '@mikro-orm/core';

export type ContactStatus = 'subscribed' | 'unsubscribed' | 'bounced';
export type SubscriptionState = 'subscribed' | 'unsubscribed';
/** Scalar property values (spec: Contact → properties). */
export type PropertyValue = string | number | boolean;

/**
 * A contact of an organization, one per lower-cased email. Written only by the statements in
 * db/sql/ (upsert-contact, delete-contact): properties merge there, not here.
 */
export class Contact {
  id!: string;
  organizationId!: string;
  email!: string;
  firstName: string | null = null;
  lastName: string | null = null;
  status: ContactStatus = 'subscribed';
  properties: Record<string, PropertyValue> = {};
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
}

export const ContactSchema = new EntitySchema<Contact>({
  class: Contact,
  tableName: 'contacts',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    email: { type: 'text' },
    firstName: { type: 'text', nullable: true },
    lastName: { type: 'text', nullable: true },
    status: { type: 'text' },
    properties: { type: 'json' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});

/** An explicit subscription row; without one a contact has the topic's default. */
export class Subscription {
  contactId!: string;
  topicId!: string;
  state!: SubscriptionState;
  /** Who changed it: `api` today; the unsubscribe page and automations will add theirs. */
  source!: string;
  changedAt!: Date;
}

export const SubscriptionSchema = new EntitySchema<Subscription>({
  class: Subscription,
  tableName: 'subscriptions',
  properties: {
    contactId: { type: 'uuid', primary: true },
    topicId: { type: 'uuid', primary: true },
    state: { type: 'text' },
    source: { type: 'text' },
    changedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
