import type { EntityManager } from '@mikro-orm/postgresql';
import type { DnsRecord } from '../entities';

/**
 * A verification check's result written over the records it read, and only over them: the
 * tracking host, a DKIM switch, a DMARC step and MTA-STS hosting rewrite the same column, and a
 * check that raced one of them must not put back what it replaced (it looks again instead).
 * Answers whether it was written. `verified_at` is set the first time the domain verifies.
 */
export async function writeCheckedRecords(
  em: EntityManager,
  q: { domainId: string; from: DnsRecord[]; records: DnsRecord[]; at: Date; status: 'pending' | 'verified' },
): Promise<boolean> {
  const rows = await em.getConnection().execute<{ id: string }[]>(
    // A verified domain stays verified, decided here: a check that read `pending` before another
    // verified it (the loop beside "verify now", or an operator) must not write `pending` back.
    `update domains set records = ?::jsonb, last_checked_at = ?, status = case when status = 'verified' then status else ? end,
            verified_at = case when ? = 'verified' and verified_at is null then ? else verified_at end
      where id = ? and records = ?::jsonb
      returning id`,
    [JSON.stringify(q.records), q.at, q.status, q.status, q.at, q.domainId, JSON.stringify(q.from)],
    'all',
    em.getTransactionContext(),
  );
  return rows.length > 0;
}
