import type { EntityManager } from '@mikro-orm/postgresql';
import { contactColumns, contactMatch, subscriptionsJson, type ContactRow } from './contact-row';

/**
 * Deletes a contact; its subscription rows go by the foreign key's cascade, suppressions (keyed by
 * address, not contact) stay. Answers the contact as it was: the statement's snapshot still holds
 * its subscriptions. Runs on `em` so the audit entry commits with it.
 */
export async function deleteContact(
  em: EntityManager,
  organizationId: string,
  ref: { id: string | null; email: string | null },
): Promise<ContactRow | null> {
  const [row] = await em.execute<ContactRow[]>(
    `with d as (delete from contacts c where ${contactMatch('c', '?', '?', '?')} returning c.*)
     select ${contactColumns('d')}, ${subscriptionsJson('d.id', '?')} as subscriptions from d`,
    [organizationId, ref.id, ref.email, organizationId],
  );
  return row ?? null;
}
