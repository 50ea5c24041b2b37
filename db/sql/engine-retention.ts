import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

/** What one page of the engine's retention removed. */
export interface FinishedWorkflowsDeleted {
  /** `dbos.workflow_status` rows; their notifications, events, event history and streams went with them (ON DELETE CASCADE). */
  workflows: number;
  /** Their `dbos.operation_outputs` (step records), `dbos.workflow_input` and `dbos.workflow_output` rows. */
  steps: number;
  inputs: number;
  outputs: number;
}

/**
 * Deletes up to $2 workflows of the embedded engine (DBOS 5.3, schema `dbos`) that finished more
 * than $1 milliseconds ago, oldest first, with everything they left behind, in one autocommitted
 * statement. The age is measured on the database's clock, the one DBOS stamps `completed_at` with.
 *
 * - Finished: DBOS's terminal statuses. Every transition into one (outcome recorded, cancel,
 *   dead-letter, timeout) sets `completed_at` in the same update as `updated_at`, and a resume or
 *   fork clears it, so `completed_at` is the last update of a finished row and is indexed
 *   (`idx_workflow_status_completed_at`): the page is a range scan, however large the table. The
 *   status list repeats the rule, so a PENDING, ENQUEUED or DELAYED row is never a candidate.
 * - Concurrency: the rows are locked (`for update skip locked`) before the delete, so two
 *   processes take different rows; a row another transaction is changing (a resume of a cancelled
 *   workflow) is skipped, one it changed is checked against the condition again before it is
 *   locked, and a resume that comes after the lock waits for it and finds the row gone.
 * - Dependents: notifications, workflow_events, workflow_events_history and streams reference
 *   workflow_status with ON DELETE CASCADE; operation_outputs, workflow_input and workflow_output
 *   carry no foreign key in DBOS 5.3 (its own deleteWorkflows deletes them by hand too), so
 *   they are deleted here by the ids the first delete returned.
 * - Every delete finds its rows by id as `= any(array(...))`, one index probe per id: joined to the
 *   CTE instead, the planner (which cannot know a CTE's size) hashed it and scanned the whole table
 *   (measured, a page of 1,000 beside 300,000 rows: 220 ms, 100 of them in that scan; by id 40-110 ms,
 *   most of it the cascades).
 *
 * Not DBOS.deleteWorkflows: it takes ids, so it needs a listing first (two round trips and five
 * statements per page), and it deletes by id without looking at the status again.
 */
const DELETE_FINISHED_WORKFLOWS: PreparedStatement = {
  name: 'delete_finished_workflows_v1',
  text: `
with doomed as (
  select workflow_uuid from dbos.workflow_status
   where completed_at < (extract(epoch from now()) * 1000)::bigint - $1::bigint
     and status in ('SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED')
   order by completed_at
   limit $2
   for update skip locked
), workflows as (
  delete from dbos.workflow_status where workflow_uuid = any(array(select workflow_uuid from doomed)) returning workflow_uuid
), steps as (
  delete from dbos.operation_outputs where workflow_uuid = any(array(select workflow_uuid from workflows)) returning 1
), inputs as (
  delete from dbos.workflow_input where workflow_uuid = any(array(select workflow_uuid from workflows)) returning 1
), outputs as (
  delete from dbos.workflow_output where workflow_uuid = any(array(select workflow_uuid from workflows)) returning 1
)
select (select count(*) from workflows)::int as workflows, (select count(*) from steps)::int as steps,
       (select count(*) from inputs)::int as inputs, (select count(*) from outputs)::int as outputs`,
};

export async function deleteFinishedWorkflows(orm: Orm, finishedMoreThanMs: number, limit: number): Promise<FinishedWorkflowsDeleted> {
  const [row] = await runPrepared<FinishedWorkflowsDeleted>(orm, DELETE_FINISHED_WORKFLOWS, [Math.round(finishedMoreThanMs), limit]);
  return row;
}
