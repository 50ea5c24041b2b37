import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';
import { refundWindow } from './rate-window';
import type { PgTimestamp } from './pg-types';

/** Gives back what a batch's reservation did not use (rate-window.ts). $1 key id, $2 window start, $3 tokens. */
const REFUND_RESERVATION: PreparedStatement = { name: 'refund_reservation_v2', text: refundWindow('$1', '$2', '$3::int') };

export async function refundReservation(orm: Orm, keyId: string, windowStart: Date | PgTimestamp, tokens: number): Promise<void> {
  if (tokens > 0) await runPrepared(orm, REFUND_RESERVATION, [keyId, windowStart, tokens]);
}
