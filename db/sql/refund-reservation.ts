import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

/**
 * Gives back what a reservation did not use (a batch reserves 100 before its body is read, then
 * costs one per message). Only within the window it was taken from: once the second has turned,
 * the new window owes it nothing. Parameters: $1 key id, $2 window start, $3 tokens to give back.
 */
const REFUND_RESERVATION: PreparedStatement = {
  name: 'refund_reservation_v1',
  text: `update key_rate_windows set used = greatest(used - $3::int, 0) where api_key_id = $1 and window_start = $2`,
};

export async function refundReservation(orm: Orm, keyId: string, windowStart: Date, tokens: number): Promise<void> {
  if (tokens > 0) await runPrepared(orm, REFUND_RESERVATION, [keyId, windowStart, tokens]);
}
