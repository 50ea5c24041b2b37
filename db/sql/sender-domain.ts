import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

/**
 * Whether a key may send from a domain: a verified, undeleted domain of its organization that the
 * key is not restricted away from. The same rule as the store statement (store-emails.ts), asked
 * early by the SMTP relay at MAIL FROM so a client learns before it sends the data; the store
 * statement still decides for the message itself.
 */
const SENDER_DOMAIN: PreparedStatement = {
  name: 'sender_domain_v1',
  text: `
select exists (
  select 1 from domains d
   where d.organization_id = $1 and lower(d.name) = $2 and d.status = 'verified' and d.deleted_at is null
     and ($3::jsonb is null or $3::jsonb @> jsonb_build_array(d.id::text))
) as allowed`,
};

export async function senderDomainAllowed(
  orm: Orm,
  organizationId: string,
  domain: string,
  keyDomainIds: string[] | null,
): Promise<boolean> {
  const [row] = await runPrepared<{ allowed: boolean }>(orm, SENDER_DOMAIN, [
    organizationId,
    domain.toLowerCase(),
    keyDomainIds === null ? null : JSON.stringify(keyDomainIds),
  ]);
  return row.allowed;
}
