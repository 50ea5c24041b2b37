/**
 * The Temporal phase's processes (bench/temporal.ts): the project's dev server (`npm run tools`
 * builds it in .tools/bin; devServerArgs) on free loopback ports, and `svc worker` processes, with
 * the wait until they poll.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { temporal as proto } from '@temporalio/proto';
import { DevServer } from '../tools/dev-server';

const ROOT = path.resolve(__dirname, '..');

/**
 * Where the dev server keeps its state: `file` (default), a SQLite file in a temporary folder, as
 * `svc temporal dev` and the tests run it; `memory`, SQLite in memory (what start-dev does without
 * --db-filename), to see what the file costs.
 */
export const SERVER_DB = process.env.BENCH_TEMPORAL_DB === 'memory' ? 'memory' : 'file';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `temporal server start-dev` as the tests start it: free loopback ports, SQLite in a temporary folder (or memory). */
export const startDevServer = (): Promise<DevServer> => DevServer.start({ inMemory: SERVER_DB === 'memory' });

export interface WorkerProcess {
  pid: number;
  exited: () => boolean;
  output(): string;
  stop(): Promise<void>;
}

/** `svc worker` (bin/svc.js) in its own process, as an operator runs it. */
export function startWorker(env: Record<string, string>): WorkerProcess {
  const proc = spawn(process.execPath, [path.join(ROOT, 'bin/svc.js'), 'worker'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.tmpdir(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (c: Buffer) => (out = (out + c).slice(-20_000));
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  return {
    pid: proc.pid!,
    exited: () => proc.exitCode !== null || proc.signalCode !== null,
    output: () => out,
    // SIGTERM: svc worker finishes its activities and closes its connections.
    stop: () => stopProcess(proc, 30_000),
  };
}

/** Waits until every worker polls the main task queue for workflow tasks and the delivery task queue for activities. */
export async function waitForPollers(address: string, taskQueue: string, workers: WorkerProcess[]): Promise<void> {
  const connection = await Connection.connect({ address });
  const { TaskQueueType } = proto.api.enums.v1;
  const pollers = async (name: string, type: proto.api.enums.v1.TaskQueueType) =>
    (await connection.workflowService.describeTaskQueue({ namespace: 'default', taskQueue: { name }, taskQueueType: type })).pollers
      ?.length ?? 0;
  try {
    const deadline = Date.now() + 180_000;
    for (;;) {
      const dead = workers.find((w) => w.exited());
      if (dead) throw new Error(`svc worker exited:\n${dead.output()}`);
      const main = await pollers(taskQueue, TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW);
      const delivery = await pollers(`${taskQueue}-delivery`, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY);
      if (main >= workers.length && delivery >= workers.length) return;
      if (Date.now() > deadline) throw new Error(`svc worker not polling after 180 s:\n${workers.map((w) => w.output()).join('\n')}`);
      await sleep(250);
    }
  } finally {
    await connection.close();
  }
}

async function stopProcess(proc: ChildProcess, graceMs: number): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}
