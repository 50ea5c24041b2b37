import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

/**
 * The inbound listener's statements (issue 14). A message is stored before the SMTP reply; the
 * processor claims pending rows with FOR UPDATE SKIP LOCKED and stamps each in the transaction
 * that applies it, so a message is applied once even across crashes and several processes.
 */

/** Whether `host` is the return-path host of a live domain: the only hosts the listener takes mail for. */
const KNOWN_RETURN_PATH_HOST: PreparedStatement = {
  name: 'known_return_path_host_v1',
  text: `select exists (select 1 from domains where return_path_host = $1 and deleted_at is null) as known`,
};

export async function knownReturnPathHost(orm: Orm, host: string): Promise<boolean> {
  const [row] = await runPrepared<{ known: boolean }>(orm, KNOWN_RETURN_PATH_HOST, [host.toLowerCase()]);
  return row.known;
}

const STORE_INBOUND: PreparedStatement = {
  name: 'store_inbound_v1',
  text: `insert into inbound_messages (remote_address, mail_from, rcpt_to, size, raw) values ($1, $2, $3::text[], $4, $5) returning id`,
};

/** Stores one accepted message (committed before the listener answers 250). */
export async function storeInbound(
  orm: Orm,
  m: { remoteAddress: string | null; mailFrom: string | null; rcptTo: string[]; raw: Buffer },
): Promise<string> {
  const [row] = await runPrepared<{ id: string }>(orm, STORE_INBOUND, [m.remoteAddress, m.mailFrom, m.rcptTo, m.raw.length, m.raw]);
  return row.id;
}

export interface PendingInbound {
  id: string;
  rcptTo: string[];
  raw: Buffer;
}

/** The oldest unprocessed message, locked for this transaction (others skip it), or null. */
export async function claimInbound(em: EntityManager): Promise<PendingInbound | null> {
  const rows = await em.getConnection().execute<{ id: string; rcpt_to: string[]; raw: Buffer }[]>(
    `select id, rcpt_to, raw from inbound_messages where processed_at is null
      order by received_at, id limit 1 for update skip locked`,
    [],
    'all',
    em.getTransactionContext(),
  );
  return rows.length ? { id: rows[0].id, rcptTo: rows[0].rcpt_to, raw: rows[0].raw } : null;
}

/** Stamps a claimed message with what it turned out to be. */
export async function markInboundProcessed(
  em: EntityManager,
  id: string,
  result: { result: string; emailId: string | null; recipientId: string | null },
): Promise<void> {
  await em
    .getConnection()
    .execute(
      `update inbound_messages set processed_at = now(), outcome = ?, email_id = ?, recipient_id = ? where id = ?`,
      [result.result, result.emailId, result.recipientId, id],
      'run',
      em.getTransactionContext(),
    );
}
