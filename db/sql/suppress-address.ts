import type { EntityManager } from '@mikro-orm/postgresql';
import type { SuppressionReason } from '../entities';
import { uuidv7 } from '../ids';

/**
 * Puts an address on its organization's suppression list (the first reason stays: a later
 * complaint does not rewrite why a bounced address was listed), and on a hard bounce sets the
 * organization's contact of that address to `bounced`. One statement, so the list and the contact
 * never disagree; run on the caller's EntityManager so it commits with the event that caused it.
 * Live mail only: the callers never pass test mail here (the spec keeps test mail off the list).
 */
export async function suppressAddress(
  em: EntityManager,
  s: { organizationId: string; address: string; reason: SuppressionReason; emailId: string; bounceContact: boolean },
): Promise<{ added: boolean; contactBounced: boolean }> {
  const [row] = await em.getConnection().execute<{ added: number; contacts: number }[]>(
    `
with s as (
  insert into suppressions (id, organization_id, email, reason, source_email_id, created_at)
  values (?, ?, ?, ?, ?, now())
  on conflict (organization_id, email) do nothing
  returning 1
), c as (
  update contacts set status = 'bounced', updated_at = now()
   where ? and organization_id = ? and email = ? and status <> 'bounced'
  returning 1
)
select (select count(*) from s)::int as added, (select count(*) from c)::int as contacts`,
    [uuidv7(), s.organizationId, s.address, s.reason, s.emailId, s.bounceContact, s.organizationId, s.address],
    'all',
    em.getTransactionContext(),
  );
  return { added: row.added > 0, contactBounced: row.contacts > 0 };
}
