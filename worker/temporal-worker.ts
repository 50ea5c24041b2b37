import { NativeConnection, Worker } from '@temporalio/worker';
import { Context } from '@temporalio/activity';
import type { Activities } from '../activities';
import type { TemporalSettings } from './temporal-engine';
import type { Logger } from 'pino';
import { WORKFLOWS } from '../workflows';

export interface TemporalWorkerOptions {
  settings: TemporalSettings;
  activities: Activities;
  /** Live deliveries per second across every worker of the delivery task queue (the spec's 12). */
  sendRatePerSecond: number;
  /** Activities running at once in this process, per task queue. */
  concurrency: number;
  log: Logger;
  /** The workflow code to bundle: this release's (workflows/temporal) unless a test runs another release's. */
  workflowsPath?: string;
}

export interface RunningTemporalWorker {
  /** Settles when both workers have stopped (after stop() or a fatal error). */
  done: Promise<void>;
  stop(): Promise<void>;
}

/**
 * A worker process for the Temporal engine: one Worker on the main task queue (the bundled
 * workflows and every activity, for runs that keep them there) and one on the delivery task
 * queue that only runs the activities defined to run on `delivery` (`deliver`, `deliverBatch`),
 * with the send rate enforced by the Temporal server for the whole task queue
 * (`maxTaskQueueActivitiesPerSecond`), so adding workers never raises it.
 */
export async function runTemporalWorker(opts: TemporalWorkerOptions): Promise<RunningTemporalWorker> {
  const { settings, activities, log } = opts;
  const connection = await NativeConnection.connect(settings.connection).catch((err: Error) => {
    throw new Error(`cannot reach Temporal at ${settings.connection.address} (TEMPORAL_ADDRESS): ${err.message}`);
  });
  const main = await Worker.create({
    connection,
    namespace: settings.namespace,
    taskQueue: settings.taskQueue,
    workflowsPath: opts.workflowsPath ?? require.resolve('../workflows/temporal'),
    activities: heartbeating(activities),
    maxConcurrentActivityTaskExecutions: opts.concurrency,
    maxHeartbeatThrottleInterval: HEARTBEAT_EVERY_MS,
  });
  const delivery = await Worker.create({
    connection,
    namespace: settings.namespace,
    taskQueue: settings.deliveryTaskQueue,
    activities: heartbeating(deliveryActivities(activities)),
    maxHeartbeatThrottleInterval: HEARTBEAT_EVERY_MS,
    maxTaskQueueActivitiesPerSecond: opts.sendRatePerSecond,
    maxConcurrentActivityTaskExecutions: opts.concurrency,
  });
  log.info(
    { taskQueue: settings.taskQueue, deliveryTaskQueue: settings.deliveryTaskQueue, sendRatePerSecond: opts.sendRatePerSecond },
    'temporal worker running',
  );
  const done = Promise.all([main.run(), delivery.run()]).then(
    async () => {
      await connection.close();
    },
    async (err) => {
      log.error({ err }, 'temporal worker stopped with an error');
      await connection.close();
      throw err;
    },
  );
  return {
    done,
    async stop() {
      for (const w of [main, delivery]) if (w.getState() === 'RUNNING') w.shutdown();
      await done.catch(() => undefined);
    },
  };
}

/** The activities every workflow defines to run on `delivery`: what the delivery task queue runs. */
export function deliveryActivities(activities: Activities): Partial<Activities> {
  const names = WORKFLOWS.flatMap((def) =>
    Object.entries(def.activities)
      .filter(([, a]) => a.runsOn === 'delivery')
      .map(([name]) => name),
  );
  return Object.fromEntries(names.map((n) => [n, activities[n as keyof Activities]]));
}

/** How often a running activity beats, and the most the SDK holds a beat back from the server (its default is 0.8 × the timeout). */
const HEARTBEAT_EVERY_MS = 5_000;

/**
 * Each activity heartbeats while it runs, so the server tells a live worker's long delivery pass
 * from a dead worker's (heartbeatTimeout in workflows/temporal/binding.ts). The activities stay
 * engine-free: the beat is the worker's, not theirs, and says only "still running".
 */
export function heartbeating<T extends object>(activities: T): T {
  return Object.fromEntries(
    Object.entries(activities).map(([name, fn]) => [
      name,
      async (...args: unknown[]) => {
        const ctx = Context.current();
        const timer = setInterval(() => ctx.heartbeat(), HEARTBEAT_EVERY_MS);
        try {
          return await (fn as (...a: unknown[]) => Promise<unknown>)(...args);
        } finally {
          clearInterval(timer);
        }
      },
    ]),
  ) as T;
}
