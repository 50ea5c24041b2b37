import type { Orm } from '../../db/orm';
import type { ContactRow } from '../../db/sql/contact-row';
import { changeSubscriptions as changeStatement } from '../../db/sql/change-subscriptions';
import { readContact } from '../../db/sql/read-contact';
import { notFound } from '../errors';
import type { ContactRef } from './lookup';
import { unknownTopic } from './rules';
import type { SubscriptionChange } from './schema';

const FOREIGN_KEY_VIOLATION = '23503';

/**
 * Applies a contact's subscription changes, all or nothing (db/sql/change-subscriptions.ts). Only
 * existing topics: an unknown slug is 422 unknown_topic and nothing is written.
 */
export async function changeSubscriptions(
  orm: Orm,
  organizationId: string,
  ref: ContactRef,
  changes: SubscriptionChange[],
): Promise<ContactRow> {
  let row;
  try {
    row = await changeStatement(orm, organizationId, ref, changes, new Date());
  } catch (err) {
    // A topic deleted between the statement's read and its write.
    if ((err as { code?: string }).code === FOREIGN_KEY_VIOLATION) throw unknownTopic(changes.map((c) => c.slug));
    throw err;
  }
  if (!row.contact_exists) throw notFound('contact');
  if (row.unknown_topics.length) throw unknownTopic(row.unknown_topics);
  if (!row.contact) throw notFound('contact');
  if (!row.unwritten) return row.contact;
  // A fresh read shows what a concurrent change to the same topics committed meanwhile.
  return (await readContact(orm, organizationId, { id: row.contact.id, email: null })) ?? row.contact;
}
