import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';

/** Who holds an executor id: where and as which pid (whether it is stale, the claim statement decides). */
export interface WorkerRow {
  host: string;
  pid: number;
}

const READ_WORKER: PreparedStatement = { name: 'read_worker_v2', text: `select host, pid from workers where id = $1` };

export async function readWorker(orm: Orm, id: string): Promise<WorkerRow | null> {
  const [row] = await runPrepared<WorkerRow>(orm, READ_WORKER, [id]);
  return row ?? null;
}
