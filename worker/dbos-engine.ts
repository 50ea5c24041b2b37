import { DBOS, Error as DBOSErrors, type StepConfig } from '@dbos-inc/dbos-sdk';
import type { Logger } from 'pino';
import type { Activities } from '../activities';
import { isNonRetryable } from '../activities/errors';
import { retryPolicy, type WorkflowContext } from '../workflows/context';
import { QUEUES, type ActivityDef, type AnyWorkflowDef, type QueueName } from '../workflows/definition';
import { assertDeclared, splitPatches, withPatches } from '../workflows/versioning';
import { WORKFLOWS } from '../workflows';
import type { Stream } from '../db/entities';
import type { Engine } from './engine';
import { dbosLogger } from './dbos-logger';
import { LOCKS, withAdvisoryLock } from '../db/advisory-lock';

export interface DbosEngineOptions {
  databaseUrl: string;
  activities: Activities;
  retryBaseSeconds: number;
  log: Logger;
  /** Runs at once in this process, per queue. */
  workerConcurrency: number;
  /**
   * This process's executor id, held by it alone (worker/executors.ts). At launch DBOS recovers the
   * unfinished workflows of this id only, never another process's.
   */
  executorId: string;
  /** Fixed so that workflows left pending by a crash are recovered by the next process, whatever its code hash. */
  applicationVersion?: string;
}

/** The DBOS application name: takeover re-enqueues only this application's workflows. */
export const APPLICATION_NAME = 'svc-mail';
/** The application version every process runs under (DBOS's start-up recovery matches on it). */
export const APPLICATION_VERSION = 'svc-mail-1';
/** DBOS's queue for workflows started without one: recovered runs of unqueued workflows go there (DBOS 5.3). */
export const DBOS_INTERNAL_QUEUE = '_dbos_internal_queue';

/**
 * Queue priority per stream (lower is dequeued first): a transactional run waiting behind bulk
 * runs in the rate-limited delivery queue is started before them.
 */
const PRIORITY: Record<Stream, number> = { transactional: 1, bulk: 2 };

/** DBOS is a process-wide singleton: workflows are registered once, against the current engine's activities. */
const registered = new Map<string, (input: unknown) => Promise<unknown>>();
let current: { activities: Activities; retryBaseSeconds: number } | undefined;

/**
 * A DBOS step's options for an activity: the retry policy of its definition. Where it runs is
 * Temporal's concern (task queues); the embedded engine runs every step in this process.
 */
export function stepOptions(def: ActivityDef, retryBaseSeconds: number): StepConfig {
  const policy = retryPolicy(def.retry, retryBaseSeconds);
  return {
    retriesAllowed: true,
    maxAttempts: policy.maxAttempts,
    intervalSeconds: policy.initialIntervalSeconds,
    backoffRate: policy.backoffCoefficient,
    shouldRetry: (err) => !isNonRetryable(err),
  };
}

/** The context one workflow gets: only its own activities (those its definition lists), as DBOS steps. */
function dbosContext<A extends object>(
  activities: A,
  defs: Record<keyof A, ActivityDef>,
  retryBaseSeconds: number,
  versions: { def: AnyWorkflowDef; patches: ReadonlySet<string> },
): WorkflowContext<A> {
  const proxy = {} as Record<string, unknown>;
  for (const name of Object.keys(defs) as (keyof A & string)[]) {
    proxy[name] = (...args: unknown[]) =>
      DBOS.runStep(() => (activities[name] as (...a: unknown[]) => Promise<unknown>)(...args), {
        name,
        ...stepOptions(defs[name], retryBaseSeconds),
      });
  }
  return {
    now: () => DBOS.now(),
    sleepUntil: async (epochMs) => {
      const now = await DBOS.now();
      if (epochMs > now) await DBOS.sleep(epochMs - now);
    },
    waitForSignal: async (name, deadlineEpochMs) => (await DBOS.recv(name, { deadlineEpochMS: deadlineEpochMs })) !== null,
    // A recovered run re-executes from its start: it keeps the path it started on, all the way.
    patched: (id) => (assertDeclared(versions.def, id), versions.patches.has(id)),
    deprecatePatch: (id) => assertDeclared(versions.def, id),
    activities: proxy as A,
  };
}

/**
 * The embedded engine: DBOS Transact on the service's own PostgreSQL (schema `dbos`), in-process,
 * running every workflow of workflows/index.ts. One process runs one embedded engine.
 */
export async function startDbosEngine(opts: DbosEngineOptions): Promise<Engine> {
  current = { activities: opts.activities, retryBaseSeconds: opts.retryBaseSeconds };
  for (const def of WORKFLOWS) {
    if (registered.has(def.name)) continue;
    const run = DBOS.registerWorkflow(
      async (given: unknown) => {
        if (!current) throw new Error('embedded engine not started');
        const { patches, input } = splitPatches(given);
        return def.body(dbosContext(current.activities, def.activities, current.retryBaseSeconds, { def, patches }), input);
      },
      { name: def.name },
    );
    registered.set(def.name, run);
  }
  const log = opts.log.child({ component: 'dbos' });
  DBOS.setConfig({
    name: APPLICATION_NAME,
    systemDatabaseUrl: opts.databaseUrl,
    systemDatabasePoolSize: 20,
    applicationVersion: opts.applicationVersion ?? APPLICATION_VERSION,
    executorID: opts.executorId,
    logger: dbosLogger(log),
  });
  // DBOS creates and migrates its schema at launch; processes launching together take turns.
  await withAdvisoryLock(opts.databaseUrl, LOCKS.engineLaunch, () => DBOS.launch());
  // Queues decouple acceptance from execution: the API only records the start; workers dispatch
  // at a bounded concurrency, so a burst of sends never starves the API of CPU or connections.
  // The send rate is not DBOS's limiter: it counts runs, and a run delivers a batch; the outbox
  // takes each live message's start from the rate in SQL (worker/outbox.ts).
  for (const name of Object.keys(QUEUES)) {
    await DBOS.registerQueue(name, {
      workerConcurrency: opts.workerConcurrency,
      minPollingIntervalMs: 100,
      onConflict: 'always_update',
    });
  }
  // Enough started runs to keep each queue busy for a while; the backlog past it waits in the outbox.
  const highWater = opts.workerConcurrency * 4;
  let running = true;
  log.info({ executorId: opts.executorId }, 'embedded workflow engine (DBOS) launched');
  const engine: Engine = {
    name: 'embedded',
    waitsScheduled: false,
    async start(def, workflowId, given, startOpts = {}) {
      // The patches this code knows go with the run, for its body to ask after a restart.
      const input = withPatches(def, given);
      if (startOpts.signal) {
        const { signal, ...rest } = startOpts;
        await engine.start(def, workflowId, given, rest);
        await engine.signal(workflowId, signal);
        return;
      }
      const run = registered.get(def.name);
      if (!run) throw new Error(`workflow ${def.name} is not listed in workflows/index.ts`);
      const queueName = startOpts.queue ?? def.queue;
      if (queueName === null) {
        await DBOS.startWorkflow(run, { workflowID: workflowId })(input);
        return;
      }
      await DBOS.startWorkflow(run, {
        workflowID: workflowId,
        queueName,
        enqueueOptions: { priority: PRIORITY[startOpts.stream ?? 'transactional'] },
      })(input);
    },
    async room(queue, stream = 'transactional') {
      // Each stream has its own window in the queue: a bulk backlog fills only its own.
      const limit = highWater;
      const waiting = await DBOS.listQueuedWorkflows({
        queueName: queue,
        status: ['ENQUEUED', 'PENDING'],
        limit: limit * 2,
        loadInput: false,
        loadOutput: false,
      });
      return limit - waiting.filter((w) => w.priority === PRIORITY[stream]).length;
    },
    async signal(workflowId, signal, occurrence) {
      // Keyed, so a repeated signal (a retried cancel) is delivered once.
      try {
        await DBOS.send(workflowId, { at: Date.now() }, signal, `${signal}:${workflowId}${occurrence ? `:${occurrence}` : ''}`);
      } catch (err) {
        // No such run: never started under that id (a message delivered by a batch) or removed by
        // retention after it ended. Either way nothing waits for the signal.
        if (err instanceof DBOSErrors.DBOSNonExistentWorkflowError) return;
        throw err;
      }
    },
    ready: () => running,
    async stop() {
      running = false;
      await DBOS.shutdown({ workflowCompletionTimeoutMS: 5000 });
    },
  };
  return engine;
}
