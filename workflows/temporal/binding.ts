import {
  CancellationScope,
  condition,
  upsertSearchAttributes,
  defineSignal,
  deprecatePatch,
  log,
  patched,
  proxyActivities,
  setHandler,
  sleep,
  type ActivityOptions,
} from '@temporalio/workflow';
import { retryPolicy, NON_RETRYABLE_ERROR_TYPES, type WorkflowContext } from '../context';
import type { ActivityDef, WorkflowDef } from '../definition';
import { assertDeclared } from '../versioning';
import { OUTCOME_ATTRIBUTE, OUTCOME_PATCH } from './outcome';

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
  /** The namespace has the SvcOutcome search attribute (the engine registered it): the run sets it as it ends. */
  outcomeAttribute?: boolean;
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
 * Patch marking runs whose operator cancellation (the Temporal UI's "Request Cancellation", `temporal
 * workflow cancel`) is settled by the definition's `onCancel` in PostgreSQL instead of unwinding the
 * body: an unwound run left its message `queued` for good, with no run left to send or cancel it
 * (issue 51). Runs whose history predates it replay as they ran.
 */
export const OPERATOR_CANCEL_PATCH = 'operator-cancel-settles';

/** The context plus what the binding does with it: wake a wait as if its signal had come. */
interface BoundContext<A> {
  ctx: WorkflowContext<A>;
  wake(signal: string): void;
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
  return boundContext(defs, signals, binding).ctx;
}

function boundContext<A extends object>(
  defs: Record<keyof A, ActivityDef>,
  signals: readonly string[],
  binding: TemporalBinding,
  def?: Pick<WorkflowDef, 'name' | 'patches'>,
): BoundContext<A> {
  // Signals count up and a wait consumes one, the same semantics as DBOS's recv on a topic.
  const pending = new Map<string, number>();
  const wake = (name: string) => void pending.set(name, (pending.get(name) ?? 0) + 1);
  for (const name of signals) {
    pending.set(name, 0);
    setHandler(defineSignal<[unknown?]>(name), () => wake(name));
  }
  type Proxy = Record<string, (...args: unknown[]) => Promise<unknown>>;
  const activities = {} as Record<string, unknown>;
  for (const name of Object.keys(defs) as (keyof A & string)[]) {
    const proxy = proxyActivities<Proxy>(activityOptions(defs[name], binding));
    activities[name] = (...args: unknown[]) => proxy[name](...args);
  }
  const ctx: WorkflowContext<A> = {
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
    // Temporal's own versioning: a marker in the history where a run first took the new path.
    patched: (id) => (def && assertDeclared(def, id), patched(id)),
    deprecatePatch: (id) => (def && assertDeclared(def, id), deprecatePatch(id)),
    activities: activities as A,
  };
  return { ctx, wake: (name) => void (pending.has(name) && wake(name)) };
}

/**
 * A workflow definition as a Temporal workflow function: the engine settings come in its input
 * (TemporalBinding) and the body gets the rest. Export it from temporal/index.ts under the
 * definition's name, which is the workflow type.
 *
 * The body runs in a scope an operator's cancellation does not reach: the run's state lives in
 * PostgreSQL, which unwinding the body would leave as it was. The definition's `onCancel` says
 * what the cancellation means there (SendEmail: cancel the message if it is still `queued`) and
 * which waits it ends; the body then goes on and reads the outcome from the database, as it does
 * after the API's cancel. A definition without `onCancel` runs on: the cancellation is logged and
 * its state is changed through the API.
 */
export function temporalWorkflow<I extends object, R, A extends object>(
  def: WorkflowDef<I, R, A>,
): (input: I & TemporalBinding) => Promise<R> {
  return async (input) => {
    const { transportRetryBaseSeconds, deliveryTaskQueue, outcomeAttribute, ...rest } = input;
    const bound = boundContext<A>(def.activities, def.signals, { transportRetryBaseSeconds, deliveryTaskQueue }, def);
    const root = CancellationScope.current();
    return CancellationScope.nonCancellable(async () => {
      const body = new CancellationScope();
      root.cancelRequested.catch(() => {
        // Recorded before the patch: the run was unwound, and replays so.
        if (!patched(OPERATOR_CANCEL_PATCH)) return body.cancel();
        if (!def.onCancel) return log.warn('cancellation requested: this workflow runs on; its state changes through the API');
        CancellationScope.nonCancellable(async () => {
          for (const signal of await def.onCancel!(bound.ctx, rest as unknown as I)) bound.wake(signal);
        }).catch((err: unknown) => log.error('cancellation could not be settled; the run goes on', { error: String(err) }));
      });
      const result = await body.run(() => def.body(bound.ctx, rest as unknown as I));
      // In the run's last workflow task, with its completion: the list shows it once the run has ended.
      if (def.outcome && outcomeAttribute && patched(OUTCOME_PATCH)) {
        // The untyped form: the typed keys live in @temporalio/common, outside what workflows import.
        upsertSearchAttributes({ [OUTCOME_ATTRIBUTE]: [def.outcome(result)] });
      }
      return result;
    });
  };
}
