import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

/** The heartbeat: false when the row is no longer this process's (it was taken over as dead). $1 id, $2 host, $3 pid. */
const RENEW_WORKER: PreparedStatement = {
  name: 'renew_worker_v1',
  text: `update workers set heartbeat_at = now() where id = $1 and host = $2 and pid = $3 returning id`,
};

export async function renewWorker(orm: Orm, id: string, host: string, pid: number): Promise<boolean> {
  return (await runPrepared(orm, RENEW_WORKER, [id, host, pid])).length === 1;
}
