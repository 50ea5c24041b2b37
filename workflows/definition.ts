import type { RetryClass, WorkflowContext } from './context';

/**
 * Where a workflow's runs wait for a worker. `delivery` is rate-limited across the platform (the
 * spec's worker send rate) and, on Temporal, sends the activities that run on `delivery` to the
 * delivery task queue; `simulation` only bounds concurrency.
 */
export const QUEUES = {
  delivery: { rateLimited: true },
  simulation: { rateLimited: false },
} as const;

export type QueueName = keyof typeof QUEUES;

/**
 * Where an activity runs on Temporal. `delivery`: on the rate-limited delivery task queue, where
 * the SMTP workers are, for runs of a rate-limited queue (live mail); a run of any other queue
 * (test mail) keeps it on its own task queue. `default`: on the workflow's own task queue. The
 * embedded engine runs every activity in its process and ignores it.
 */
export type RunsOn = 'default' | 'delivery';

/** One activity of a workflow: where it runs, how its thrown failures are retried, how long one attempt may take. */
export interface ActivityDef {
  runsOn: RunsOn;
  retry: RetryClass;
  /** The longest one attempt may run on Temporal (start-to-close), in seconds; default 60, a database statement batch. */
  timeoutSeconds?: number;
}

/** Database work: on the workflow's task queue, quick retries, a minute an attempt. */
export const DATABASE_ACTIVITY: ActivityDef = { runsOn: 'default', retry: 'database' };

/** One attempt of work that waits on the network: an SMTP transaction with a large message, a batch of webhook POSTs. */
export const LONG_ATTEMPT_SECONDS = 600;

/**
 * Everything an engine needs to run a workflow: its name (the same on every engine), its
 * engine-free body, where and how each of its activities runs, the signals it waits for, and the
 * queue its runs take by default (null: started at once, unqueued, for loops that mostly sleep).
 */
export interface WorkflowDef<I = never, R = unknown, A extends object = object> {
  name: string;
  body: (ctx: WorkflowContext<A>, input: I) => Promise<R>;
  activities: Record<keyof A, ActivityDef>;
  signals: readonly string[];
  queue: QueueName | null;
  /** The version patches the body asks about (workflows/versioning.ts); none: the body never changed under runs in flight. */
  patches?: readonly string[];
  /**
   * What an operator's cancellation of a run in the engine's own tools (the Temporal UI) means:
   * settles it in the database (one activity, as the API's cancel would) and answers the signals
   * whose waits end, as if they had come; the body goes on and reads the outcome. Absent: the run
   * goes on untouched (workflows/temporal/binding.ts).
   */
  onCancel?: (ctx: WorkflowContext<A>, input: I) => Promise<string[]>;
  /**
   * How the run ended, in a word an operator filters by (`SvcOutcome = 'canceled'` in the Temporal
   * UI): the run "Completed" either way, canceled message or delivered. Absent: the result says it.
   */
  outcome?: (result: R) => string;
}

/** Checks a definition's parts against each other (activity map = activity contract) and keeps its types. */
export const defineWorkflow = <I, R, A extends object>(def: WorkflowDef<I, R, A>): WorkflowDef<I, R, A> => def;

/** A definition of any workflow, as engines hold them. */
export type AnyWorkflowDef = WorkflowDef<any, any, any>;

/** A definition whose runs take input `I`, whatever its result and activities. */
export type StartableDef<I> = WorkflowDef<I, any, any>;
