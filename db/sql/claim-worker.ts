import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

/**
 * Takes an executor id for this process: free, or held by a process known to be dead (its
 * heartbeat stale, or the caller saw that the holding pid on this very host no longer runs).
 * One statement: of two processes claiming one id, one gets it. Parameters: $1 id, $2 host, $3 pid,
 * $4 dead-after seconds, $5 a pid on $2 known not to run (-1: none).
 */
const CLAIM_WORKER: PreparedStatement = {
  name: 'claim_worker_v1',
  text: `
insert into workers (id, host, pid, started_at, heartbeat_at) values ($1, $2, $3, now(), now())
on conflict (id) do update set host = excluded.host, pid = excluded.pid, started_at = now(), heartbeat_at = now()
 where workers.heartbeat_at < now() - make_interval(secs => $4::float8) or (workers.host = $2 and workers.pid = $5::int)
returning id`,
};

export async function claimWorker(
  orm: Orm,
  id: string,
  host: string,
  pid: number,
  deadAfterSeconds: number,
  deadPid: number,
): Promise<boolean> {
  return (await runPrepared(orm, CLAIM_WORKER, [id, host, pid, deadAfterSeconds, deadPid])).length === 1;
}
