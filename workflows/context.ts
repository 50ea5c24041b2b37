/**
 * What a workflow body may use. Engine bindings (DBOS here, Temporal later) provide it; bodies
 * never touch an engine, Node modules or activity implementations, so they stay deterministic
 * and run unchanged on either engine.
 */
export interface WorkflowContext<A> {
  /** Deterministic current time in epoch milliseconds (recorded on first run, replayed after). */
  now(): Promise<number>;
  /**
   * The workflow's time, for an activity's input where what the activity records or decides must
   * follow the workflow's clock, not the worker's: Temporal's time-skipping test server moves
   * workflow time days ahead of the wall clock, and a wait computed from the activity's own clock
   * would collapse. Not recorded and not a command, so a body may add a call without changing
   * the history or the step records of runs already in flight (on DBOS, now() is a durable step:
   * one more would shift the steps of a run recovered after an upgrade). Absent on DBOS, whose
   * workflow time is the wall clock anyway, and in in-memory test contexts: the activity then
   * reads its own clock, as before. A body must never branch on it.
   */
  activityTime?(): number;
  /**
   * Versioning: whether this run takes the path a body change added under patch `id` (read it
   * through workflows/versioning.ts). Absent in in-memory test contexts, where every run is new.
   */
  patched?(id: string): boolean;
  /** The old path of patch `id` is gone (workflows/versioning.ts). */
  deprecatePatch?(id: string): void;
  /** Durable timer. */
  sleepUntil(epochMs: number): Promise<void>;
  /** Waits for a named signal until a deadline; true when the signal arrived first. */
  waitForSignal(name: string, deadlineEpochMs: number): Promise<boolean>;
  /** Durable activity calls, each retried by the engine according to its policy. */
  activities: A;
}

/**
 * How an activity's thrown failures are retried; bindings turn it into the engine's retry options.
 * Where the activity runs is another matter (`runsOn`, workflows/definition.ts).
 */
export type RetryClass =
  /** Database or worker trouble: retried quickly many times, a blip must not fail a message. */
  | 'database'
  /** The SMTP relay refusing for now (4xx, a dropped connection): the spec's 4 attempts with exponential backoff from 30 s. */
  | 'transport';

export interface RetryPolicy {
  maxAttempts: number;
  initialIntervalSeconds: number;
  backoffCoefficient: number;
}

export function retryPolicy(kind: RetryClass, transportBaseSeconds = 30): RetryPolicy {
  return kind === 'transport'
    ? { maxAttempts: 4, initialIntervalSeconds: transportBaseSeconds, backoffCoefficient: 2 }
    : { maxAttempts: 10, initialIntervalSeconds: 1, backoffCoefficient: 2 };
}

/** Error names that must never be retried: a retry cannot change the outcome. */
export const NON_RETRYABLE_ERROR_TYPES = ['PermanentFailure'];

/** A failure's innermost message, bounded: engines wrap activity errors (Temporal's ActivityFailure has a cause). */
export function describeFailure(err: unknown): string {
  let e: unknown = err;
  while (e && typeof e === 'object' && 'cause' in e && (e as { cause?: unknown }).cause) e = (e as { cause: unknown }).cause;
  if (e && typeof e === 'object' && 'message' in e) return String((e as { message: unknown }).message).slice(0, 1000);
  return String(e).slice(0, 1000);
}
