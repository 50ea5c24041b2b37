import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

/** The addresses a stored message was accepted for (suppressed ones included), lower-cased. */
const RECIPIENT_ADDRESSES: PreparedStatement = {
  name: 'recipient_addresses_v1',
  text: `select r.address from recipients r join emails e on e.id = r.email_id where r.email_id = $1 and e.organization_id = $2`,
};

export async function recipientAddresses(orm: Orm, emailId: string, organizationId: string): Promise<string[]> {
  const rows = await runPrepared<{ address: string }>(orm, RECIPIENT_ADDRESSES, [emailId, organizationId]);
  return rows.map((r) => r.address);
}
