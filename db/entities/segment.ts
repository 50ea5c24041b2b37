import { EntitySchema } from '@mikro-orm/core';

/** A condition of a segment filter, as stored (and answered) exactly as the client gave it. */
export type SegmentCondition =
  { status: 'SUBSCRIBED' | 'UNSUBSCRIBED' | 'BOUNCED' } | { topic: string; state: 'SUBSCRIBED' | 'UNSUBSCRIBED' };

export interface SegmentFilter {
  all: SegmentCondition[];
}

/** A saved filter over contacts, evaluated whenever it is read (never a stored member list). */
export class Segment {
  id!: string;
  organizationId!: string;
  name!: string;
  filter!: SegmentFilter;
  createdAt: Date = new Date();
}

export const SegmentSchema = new EntitySchema<Segment>({
  class: Segment,
  tableName: 'segments',
  properties: {
    id: { type: 'uuid', primary: true },
    organizationId: { type: 'uuid' },
    name: { type: 'text' },
    filter: { type: 'json' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
