import { proxyActivities, sleep, condition, defineSignal, setHandler, type ActivityOptions } from '@temporalio/workflow';
import { retryPolicy, NON_RETRYABLE_ERROR_TYPES, type WorkflowContext } from '../context';
import type { ActivityDef, WorkflowDef } from '../definition';

/**
 * Engine settings a Temporal run carries in its input, because workflow code cannot read the
 * environment: they are fixed when the workflow starts and replay identically.
 */
export interface TemporalBinding {
  /** First retry delay of activities retried as `transport` (the spec's 30 s; shorter in tests). */
  transportRetryBaseSeconds?: number;
  /**
   * Task queue for activities that run on `delivery`: the rate-limited delivery queue for live
   * mail. Absent (test mode): they run on the workflow's own task queue, like the other activities.
   */
  deliveryTaskQueue?: string;
}

/**
 * How long a running activity may go without its worker's heartbeat. Workers beat every 5 s and
 * flush a beat to the server at least as often (maxHeartbeatThrottleInterval), so a live worker
 * has 25 s of slack for a pause (GC, a loaded machine) before its attempt is retried elsewhere.
 */
export const HEARTBEAT_TIMEOUT_SECONDS = 30;

/** An activity's options on Temporal: its task queue from where it runs, its retry policy from how it retries. */
export function activityOptions(def: ActivityDef, binding: TemporalBinding): ActivityOptions {
  const p = retryPolicy(def.retry, binding.transportRetryBaseSeconds ?? 30);
  return {
    // One database statement batch by default; an SMTP transaction with a large message, or a
    // batch of webhook POSTs, where the definition says so.
    startToCloseTimeout: `${def.timeoutSeconds ?? 60} seconds`,
    // Workers heartbeat every running activity (worker/temporal-worker.ts): a worker killed
    // mid-activity is noticed after this, not after the whole start-to-close timeout, and the
    // attempt goes to another worker (or the same one restarted).
    heartbeatTimeout: `${HEARTBEAT_TIMEOUT_SECONDS} seconds`,
    ...(def.runsOn === 'delivery' && binding.deliveryTaskQueue ? { taskQueue: binding.deliveryTaskQueue } : {}),
    retry: {
      maximumAttempts: p.maxAttempts,
      initialInterval: p.initialIntervalSeconds * 1000,
      backoffCoefficient: p.backoffCoefficient,
      nonRetryableErrorTypes: NON_RETRYABLE_ERROR_TYPES,
    },
  };
}

/**
 * The engine-free WorkflowContext on Temporal: timers are `sleep`/`condition`, signals are
 * `defineSignal`/`setHandler` (registered before the body runs, so none is lost), activities go
 * through `proxyActivities` with the options of their definition.
 */
export function temporalContext<A extends object>(
  defs: Record<keyof A, ActivityDef>,
  signals: readonly string[],
  binding: TemporalBinding,
): WorkflowContext<A> {
  // Signals count up and a wait consumes one, the same semantics as DBOS's recv on a topic.
  const pending = new Map<string, number>();
  for (const name of signals) {
    pending.set(name, 0);
    setHandler(defineSignal<[unknown?]>(name), () => {
      pending.set(name, (pending.get(name) ?? 0) + 1);
    });
  }
  type Proxy = Record<string, (...args: unknown[]) => Promise<unknown>>;
  const activities = {} as Record<string, unknown>;
  for (const name of Object.keys(defs) as (keyof A & string)[]) {
    const proxy = proxyActivities<Proxy>(activityOptions(defs[name], binding));
    activities[name] = (...args: unknown[]) => proxy[name](...args);
  }
  return {
    // Date.now() inside a Temporal workflow is the deterministic workflow-task time.
    now: async () => Date.now(),
    // The same time, synchronously: reading it records nothing, so histories stay as they were.
    activityTime: () => Date.now(),
    sleepUntil: async (epochMs) => {
      const ms = epochMs - Date.now();
      if (ms > 0) await sleep(ms);
    },
    waitForSignal: async (name, deadlineEpochMs) => {
      if (!pending.has(name)) throw new Error(`signal ${name} was not registered with the binding`);
      const take = () => (pending.get(name) ?? 0) > 0;
      const ms = deadlineEpochMs - Date.now();
      const arrived = take() || (ms > 0 && (await condition(take, ms)));
      if (arrived) pending.set(name, pending.get(name)! - 1);
      return arrived;
    },
    activities: activities as A,
  };
}

/**
 * A workflow definition as a Temporal workflow function: the engine settings come in its input
 * (TemporalBinding) and the body gets the rest. Export it from temporal/index.ts under the
 * definition's name, which is the workflow type.
 */
export function temporalWorkflow<I extends object, R, A extends object>(
  def: WorkflowDef<I, R, A>,
): (input: I & TemporalBinding) => Promise<R> {
  return async (input) => {
    const { transportRetryBaseSeconds, deliveryTaskQueue, ...rest } = input;
    return def.body(
      temporalContext<A>(def.activities, def.signals, { transportRetryBaseSeconds, deliveryTaskQueue }),
      rest as unknown as I,
    );
  };
}
