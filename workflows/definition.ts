import type { RetryClass, WorkflowContext } from './context';

/**
 * Where a workflow's runs wait for a worker. `delivery` is rate-limited across the platform (the
 * spec's worker send rate) and, on Temporal, sends its `transport` activities to the delivery
 * task queue; `simulation` only bounds concurrency.
 */
export const QUEUES = {
  delivery: { rateLimited: true },
  simulation: { rateLimited: false },
} as const;

export type QueueName = keyof typeof QUEUES;

/**
 * Everything an engine needs to run a workflow: its name (the same on every engine), its
 * engine-free body, how each of its activities is retried, the signals it waits for, and the
 * queue its runs take by default (null: started at once, unqueued, for loops that mostly sleep).
 */
export interface WorkflowDef<I = never, R = unknown, A extends object = object> {
  name: string;
  body: (ctx: WorkflowContext<A>, input: I) => Promise<R>;
  retry: Record<keyof A, RetryClass>;
  signals: readonly string[];
  queue: QueueName | null;
}

/** Checks a definition's parts against each other (retry map = activity contract) and keeps its types. */
export const defineWorkflow = <I, R, A extends object>(def: WorkflowDef<I, R, A>): WorkflowDef<I, R, A> => def;

/** A definition of any workflow, as engines hold them. */
export type AnyWorkflowDef = WorkflowDef<any, any, any>;

/** A definition whose runs take input `I`, whatever its result and activities. */
export type StartableDef<I> = WorkflowDef<I, any, any>;
