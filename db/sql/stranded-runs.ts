import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';
import type { PgTimestamp } from './pg-types';

/** A message whose run has started and not finished it, with the workflow id of that run. */
export interface OpenRunRow {
  id: string;
  status: 'queued' | 'sending';
  run: string;
  updated_at: PgTimestamp;
}

/**
 * A message a run holds: started (out of the outbox), not finished, not waiting in its row for a
 * cap or a direct retry (no run's then). Its first two terms are emails_open_runs_idx's
 * predicate; both statements below say it this one way.
 */
const HELD_BY_A_RUN = `status in ('queued', 'sending') and enqueued_at is not null and retry_reason is null and waiting_reason is null`;
/** The run holding it: the owner its claim wrote, else the run the outbox started it on, else a SendEmail run (the email id). */
const HOLDING_RUN = `coalesce(claimed_by, started_run, id::text)`;

const OPEN_RUNS: PreparedStatement = {
  name: 'open_runs_page_v2',
  text: `
select id, status, ${HOLDING_RUN} as run, updated_at from emails
 where ${HELD_BY_A_RUN}
   and (updated_at, id) > ($1::timestamptz, $2::uuid)
   and updated_at < $3::timestamptz
   and (status = 'queued' or updated_at < $4::timestamptz)
 order by updated_at, id
 limit $5`,
};

/**
 * A page of messages a run holds (emails_open_runs_idx), after `after`, untouched since
 * `queuedBefore` (`sendingBefore` for one `sending`: an attempt of a terminated run can still be
 * finishing for as long as an attempt may take). Messages waiting in their row (a cap, a direct
 * retry) are no run's. `run` is the run's workflow id: the owner its claim wrote (claimed_by), else
 * the run the outbox started it on (started_run), else the email id (a SendEmail run).
 */
export async function openRunsPage(
  orm: Orm,
  q: { after: { at: Date; id: string }; queuedBefore: Date; sendingBefore: Date; limit: number },
): Promise<OpenRunRow[]> {
  return runPrepared<OpenRunRow>(orm, OPEN_RUNS, [q.after.at, q.after.id, q.queuedBefore, q.sendingBefore, q.limit]);
}

const HAND_BACK: PreparedStatement = {
  name: 'hand_back_stranded_v2',
  text: `
update emails set status = 'queued', enqueued_at = null, claimed_by = null, started_run = null, deferrals = deferrals + 1,
       handed_back_at = coalesce(handed_back_at, $3::timestamptz), relay_retry_at = null, updated_at = $3::timestamptz
 where id = any($1::uuid[]) and ${HELD_BY_A_RUN} and ${HOLDING_RUN} = $2
returning id`,
};

/**
 * Hands the messages of a run that has ended (terminated, reset, canceled before it settled them)
 * back to the outbox, still held by that run: `queued` again, out of the timer claim
 * (handed_back_at: no run waits on a timer for it any more), and one deferral more, so the outbox
 * names their next run apart from the ended one (worker/outbox-runs.ts). Recipients keep their
 * states: one `in_flight` may have been handed to the relay and goes again under the same
 * Message-ID. Answers the ids handed back.
 */
export async function handBackStranded(orm: Orm, q: { run: string; ids: string[]; now: Date }): Promise<string[]> {
  const rows = await runPrepared<{ id: string }>(orm, HAND_BACK, [`{${q.ids.join(',')}}`, q.run, q.now]);
  return rows.map((r) => r.id);
}
