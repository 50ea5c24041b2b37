import { Client, Connection, type ConnectionOptions } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/common';
import type { NativeConnectionOptions } from '@temporalio/worker';
import type { Logger } from 'pino';
import { QUEUES } from '../workflows/definition';
import type { TemporalBinding } from '../workflows/temporal/binding';
import { RunEndedError, type Engine } from './engine';
import { ensureSearchAttributes, searchAttributePairs } from './temporal-search-attributes';
import { watchPollers } from './temporal-pollers';

/** Where the Temporal server is and which task queues the service uses. */
export interface TemporalSettings {
  /** TEMPORAL_ADDRESS, TEMPORAL_API_KEY, TEMPORAL_TLS* or a TEMPORAL_PROFILE, read by @temporalio/envconfig. */
  connection: NativeConnectionOptions;
  /** TEMPORAL_NAMESPACE (default `default`). */
  namespace: string;
  /** TEMPORAL_TASK_QUEUE: workflows and database activities (default `svc-mail`). */
  taskQueue: string;
  /** TEMPORAL_DELIVERY_TASK_QUEUE: the activities that run on `delivery`, for runs of rate-limited queues (live deliveries). */
  deliveryTaskQueue: string;
  /** First retry delay of transient delivery failures (RETRY_BASE_SECONDS). */
  retryBaseSeconds: number;
  /** How often, in ms, the API asks whether workers poll the task queues (no variable: 10 s; tests set it shorter). */
  workersCheckMs?: number;
}

/**
 * The API's side of the Temporal engine: starts and signals workflows through @temporalio/client.
 * Workflows run in `svc worker` processes (worker/temporal-worker.ts).
 */
export async function startTemporalEngine(
  settings: TemporalSettings,
  log: Logger,
  /** false: this engine only signals (an operator's command): it registers nothing on the namespace, watches no workers. */
  opts: { startsRuns?: boolean } = {},
): Promise<Engine> {
  const connection = await Connection.connect(settings.connection as ConnectionOptions).catch((err: Error) => {
    throw new Error(`cannot reach Temporal at ${settings.connection.address} (TEMPORAL_ADDRESS): ${err.message}`);
  });
  const client = new Client({ connection, namespace: settings.namespace });
  // Without them registered a start that sets them is refused: then runs start without them.
  const labelled = opts.startsRuns === false ? false : await ensureSearchAttributes(connection, settings.namespace, log);
  // An API whose workers are gone still accepts mail: /ready, the console and the log say so.
  const pollers =
    opts.startsRuns === false
      ? undefined
      : watchPollers(
          (request) => connection.workflowService.describeTaskQueue(request),
          settings.namespace,
          [
            { name: settings.taskQueue, type: 'workflow' },
            { name: settings.deliveryTaskQueue, type: 'activity' },
          ],
          log,
          settings.workersCheckMs,
        );
  let running = true;
  log.info(
    { address: settings.connection.address, namespace: settings.namespace, taskQueue: settings.taskQueue },
    'temporal engine connected',
  );

  return {
    name: 'temporal',
    waitsScheduled: true,
    /**
     * Workflow type = the definition's name; workflow id = email id (or domain loop id): a
     * repeated start (outbox retry, replayed idempotency key, verification sweep) joins the
     * running workflow, and a finished one is never run again.
     */
    async start(def, workflowId, input, opts = {}) {
      const queue = opts.queue ?? def.queue;
      // Workflow code cannot read the environment: engine settings travel in the input.
      const binding: TemporalBinding = {
        transportRetryBaseSeconds: settings.retryBaseSeconds,
        // Test mail never leaves the machine, so it skips the rate-limited delivery task queue.
        ...(queue !== null && QUEUES[queue].rateLimited ? { deliveryTaskQueue: settings.deliveryTaskQueue } : {}),
        ...(labelled ? { outcomeAttribute: true } : {}),
      };
      const options = {
        taskQueue: settings.taskQueue,
        workflowId,
        args: [{ ...(input as object), ...binding }] as [unknown],
        // Activities inherit it: the delivery task queue serves transactional sends before bulk ones.
        // Background runs (a scheduled message's timer) after everything else.
        ...(opts.background
          ? { priority: { priorityKey: 5 } }
          : opts.stream
            ? { priority: { priorityKey: opts.stream === 'bulk' ? 3 : 1 } }
            : {}),
        ...(labelled && opts.labels ? { typedSearchAttributes: searchAttributePairs(opts.labels) } : {}),
        ...(opts.labels?.summary ? { staticSummary: opts.labels.summary } : {}),
        workflowIdReusePolicy: 'REJECT_DUPLICATE' as const,
      };
      try {
        if (opts.signal) {
          // Signals the run under this id, or starts it with the signal: one call, no race between the two.
          await client.workflow.signalWithStart(def.name, { ...options, signal: opts.signal, signalArgs: [{ at: Date.now() }] });
        } else {
          await client.workflow.start(def.name, { ...options, workflowIdConflictPolicy: 'USE_EXISTING' });
        }
      } catch (err) {
        // A plain start joins a running run or finds it ended (its message was settled): a no-op.
        // Signal-with-start only fails so when the run ended, and then nothing takes the signal.
        if (err instanceof WorkflowExecutionAlreadyStartedError) {
          if (opts.signal) throw new RunEndedError(workflowId);
          return;
        }
        throw err;
      }
    },
    async signal(workflowId, signal) {
      try {
        await client.workflow.getHandle(workflowId).signal(signal, { at: Date.now() });
      } catch (err) {
        // Already finished (or never started): the database decided; nothing is waiting to wake.
        if (err instanceof WorkflowNotFoundError) return;
        throw err;
      }
    },
    async runOpen(workflowId) {
      try {
        return (await client.workflow.getHandle(workflowId).describe()).status.name === 'RUNNING';
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return false;
        throw err;
      }
    },
    // Temporal task queues hold any backlog durably and cheaply; the outbox need not hold it back.
    room: async () => null,
    ready: () => running,
    ...(pollers ? { workers: () => pollers.status() } : {}),
    async stop() {
      running = false;
      pollers?.stop();
      await connection.close();
    },
  };
}
