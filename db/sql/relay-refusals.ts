import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

const RECORD: PreparedStatement = {
  name: 'relay_refusals_v1',
  text: `
update emails e set relay_refusals = e.relay_refusals + 1, last_reply = u.reply, updated_at = $2::timestamptz,
       relay_retry_at = case when e.relay_refusals + 1 < $4 then $2::timestamptz + make_interval(secs => $3 * power(2, e.relay_refusals)) end
  from unnest($1::uuid[], $5::text[]) as u(id, reply)
 where e.id = u.id and e.status = 'sending'`,
};

/**
 * Records on each message that the relay refused it for now, with the reply, and when its run tries
 * again: the transport backoff (RETRY_BASE_SECONDS, doubling) that SendEmail's activity retries and
 * SendBatch's passes both follow, counted by the message's refusals; null once no attempt is left
 * (the run fails it next). Only a message still `sending`: one finished meanwhile keeps its end.
 */
export async function recordRelayRefusals(
  orm: Orm,
  items: { id: string; reply: string }[],
  q: { at: Date; baseSeconds: number; maxAttempts: number },
): Promise<void> {
  if (items.length === 0) return;
  await runPrepared(orm, RECORD, [items.map((i) => i.id), q.at, q.baseSeconds, q.maxAttempts, items.map((i) => i.reply.slice(0, 1000))]);
}
