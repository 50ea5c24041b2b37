import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

export interface TakeOverResult {
  /** Executor ids found dead and removed. */
  dead: string[];
  /** Their unfinished workflows, put back on their queues for any live process. */
  workflows: number;
}

/**
 * Takes over the work of dead processes: deletes every worker row whose heartbeat is older than
 * the dead-after span and, in the same statement, puts the workflows those executors left
 * running (PENDING) back on their queues (ENQUEUED), for whichever live process dequeues them
 * first. One statement decides: a dead row is deleted by one process only, and a workflow is
 * re-enqueued only while it is still PENDING under the dead id, so nothing runs twice.
 *
 * It writes DBOS's own table (schema `dbos`) the way DBOS's start-up recovery does for its own
 * executor id (DBOS 5.3, SystemDatabase.reenqueueWorkflowsForRecovery: the same columns, scoped to
 * this application's name), but for every application version: a run of another version waits,
 * enqueued, for a process of that version instead of being left PENDING under a dead id. DBOS
 * offers no public call to recover another executor; test/workflows/executors.test.ts exercises
 * this against the real DBOS. Parameters: $1 dead-after seconds, $2 the caller's own id (never
 * itself), $3 DBOS's internal queue (for unqueued workflows), $4 the DBOS application name.
 */
const TAKE_OVER_DEAD_WORKERS: PreparedStatement = {
  name: 'take_over_dead_workers_v2',
  text: `
with dead as (
  delete from workers where heartbeat_at < now() - make_interval(secs => $1::float8) and id <> $2 returning id
), requeued as (
  update dbos.workflow_status s
     set status = 'ENQUEUED', started_at_epoch_ms = null, owner_xid = null,
         updated_at = (extract(epoch from now()) * 1000)::bigint, queue_name = coalesce(s.queue_name, $3)
   where s.status = 'PENDING' and s.executor_id in (select id from dead) and (s.application_name = $4 or s.application_name is null)
  returning s.workflow_uuid
)
select coalesce((select json_agg(id) from dead), '[]') as dead, (select count(*)::int from requeued) as workflows`,
};

export async function takeOverDeadWorkers(
  orm: Orm,
  deadAfterSeconds: number,
  self: string,
  internalQueue: string,
  applicationName: string,
): Promise<TakeOverResult> {
  const [row] = await runPrepared<TakeOverResult>(orm, TAKE_OVER_DEAD_WORKERS, [deadAfterSeconds, self, internalQueue, applicationName]);
  return row;
}
