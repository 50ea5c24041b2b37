import type { Orm } from '../orm';
import type { PgTimestamp } from './pg-types';

export interface ReplayRow {
  id: string;
  idempotency_key: string;
  /** Null when the first attempt stored the message but its workflow was never started. */
  enqueued_at: PgTimestamp | null;
}

/** The messages that already hold some of an organization's idempotency keys (replays answer with their ids). */
export function findIdempotencyReplays(orm: Orm, organizationId: string, keys: string[]): Promise<ReplayRow[]> {
  return orm.em
    .fork()
    .getConnection()
    .execute(
      'select id, idempotency_key, enqueued_at from emails where organization_id = ? and idempotency_key in (select jsonb_array_elements_text(?::jsonb))',
      [organizationId, JSON.stringify(keys)],
    );
}
