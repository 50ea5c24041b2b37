import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';
import { contactColumns, contactMatch, subscriptionsJson, type ContactRow } from './contact-row';

/** A contact of the organization with its subscriptions. $1 organization, $2 id or null, $3 email or null. */
const READ_CONTACT: PreparedStatement = {
  name: 'read_contact_v1',
  text: `select ${contactColumns('c')}, ${subscriptionsJson('c.id', '$1')} as subscriptions
           from contacts c where ${contactMatch('c', '$1', '$2', '$3')}`,
};

export async function readContact(
  orm: Orm,
  organizationId: string,
  ref: { id: string | null; email: string | null },
): Promise<ContactRow | null> {
  const [row] = await runPrepared<ContactRow>(orm, READ_CONTACT, [organizationId, ref.id, ref.email]);
  return row ?? null;
}
