import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

export interface ClaimedDelivery {
  id: string;
  run: number;
  /** Attempts made in this run: 0 for a first attempt (batched), more for one handed back after it. */
  run_attempts: number;
  /** When its next attempt is due (epoch ms). */
  next_attempt_ms: number | null;
  /** The endpoint's organization (a label of the run: SvcOrganization in Temporal). */
  organization_id: string;
}

/** A run started this long ago whose attempt is this overdue was lost (a crash between claim and start). */
const LOST_AFTER = `interval '15 minutes'`;

/**
 * The dispatcher's claim, marked started in the same statement: deliveries whose run has not
 * started, oldest first per endpoint, and per endpoint only as many as fit its window (`$1` minus
 * its runs started and due now, i.e. attempting or about to), so one slow or dead endpoint's
 * backlog never takes the room of another. FOR UPDATE SKIP LOCKED: dispatchers of several
 * processes never claim one twice.
 *
 * The mark commits before the runs start, so an attempt never waits on the claim's row lock. A
 * crash in between leaves a delivery marked but without a run: such a delivery is claimed again
 * once it is long overdue (starting a run that exists is a no-op, so this never runs one twice).
 */
const CLAIM: PreparedStatement = {
  name: 'claim_webhook_deliveries_v3',
  text: `
    with fresh as (
      select c.id
        from webhook_endpoints w
        cross join lateral (
          select d.id from webhook_deliveries d
           where d.endpoint_id = w.id and d.enqueued_at is null
           order by d.created_at, d.id
           limit greatest(0, $1::int - (select count(*) from (
                    select 1 from webhook_deliveries b
                     where b.endpoint_id = w.id and b.status = 'pending' and b.enqueued_at is not null and b.next_attempt_at <= now()
                     limit $1::int) busy))
           for update skip locked
        ) c
       where exists (select 1 from webhook_deliveries x where x.endpoint_id = w.id and x.enqueued_at is null)
       limit $2::int
    ), lost as (
      select d.id from webhook_deliveries d
       where d.status = 'pending' and d.enqueued_at < now() - ${LOST_AFTER} and d.next_attempt_at < now() - ${LOST_AFTER}
       limit 100
       for update skip locked
    )
    update webhook_deliveries d set enqueued_at = now()
      from (select id from fresh union select id from lost) c
     where d.id = c.id
    returning d.id, d.run, d.run_attempts, (extract(epoch from d.next_attempt_at) * 1000)::float8 as next_attempt_ms, d.organization_id`,
};

export function claimWebhookDeliveries(orm: Orm, window: number, limit: number): Promise<ClaimedDelivery[]> {
  return runPrepared<ClaimedDelivery>(orm, CLAIM, [window, limit]);
}

/** Gives back deliveries whose run could not be started, for the next pass. */
export async function unclaimWebhookDeliveries(orm: Orm, ids: string[]): Promise<void> {
  if (ids.length)
    await orm.em
      .fork()
      .getConnection()
      .execute(`update webhook_deliveries set enqueued_at = null where id = any(?::uuid[])`, [`{${ids.join(',')}}`]);
}
