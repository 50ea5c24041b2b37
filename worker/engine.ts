import type { Stream } from '../db/entities';
import type { QueueName, StartableDef } from '../workflows/definition';

export interface StartOptions {
  /** The queue this run waits on, when not its definition's default (test-mode mail: `simulation`). */
  queue?: QueueName;
  /**
   * The sender's stream (SendEmail): transactional runs are taken before bulk ones waiting in the
   * same queue, so the platform's one send rate serves transactional mail first.
   */
  stream?: Stream;
  /**
   * A signal delivered with the start: to the run already there under this id, or to the new
   * one (Temporal: signal-with-start, one call). The outbox admits a handed-back scheduled
   * message this way. A run under the id that has ended cannot take it: RunEndedError.
   */
  signal?: string;
  /** A run that mostly waits (a scheduled message's timer): taken after every other start. */
  background?: boolean;
  /** What an operator filters runs by (Temporal search attributes; the embedded engine ignores them). */
  labels?: RunLabels;
}

/** A run's organizations, mode, stream and message kinds, each only where known. */
export interface RunLabels {
  organizations?: string[];
  mode?: string;
  stream?: string;
  kinds?: string[];
  /**
   * One line the Temporal UI shows on the run (the SDK's user metadata, `staticSummary`): what it
   * delivers, for whom. Never a body, an address or a secret: operators of a cluster see it.
   */
  summary?: string;
}

/**
 * The one port to a workflow engine, DBOS (embedded) or Temporal, for every workflow listed in
 * workflows/index.ts: starting a run, signalling it, and how much a queue should still take.
 */
export interface Engine {
  readonly name: string;
  /**
   * Whether scheduled mail gets its run at acceptance, waiting on the engine's durable timer
   * (Temporal: timers are cheap server state an operator can see), or waits as a row in the
   * outbox until due (embedded: a DBOS run waiting for days is held in memory and recovered at
   * every start, so the outbox's due-time index is the timer).
   */
  readonly waitsScheduled: boolean;
  /** Starts a run of `def` under `workflowId`; starting an id that ran or runs is a no-op. */
  start<I>(def: StartableDef<I>, workflowId: string, input: I, opts?: StartOptions): Promise<void>;
  /**
   * Delivers a named signal to a run; a run that ended (or never started) is left alone. Repeats
   * with the same `occurrence` (default: one per signal name) are delivered once.
   */
  signal(workflowId: string, signal: string, occurrence?: string): Promise<void>;
  /**
   * How many more runs of a stream (default transactional) `queue` should take now, or null when the engine holds any backlog well
   * (Temporal). The outbox keeps the rest, so a burst of accepted mail does not become a burst of
   * starts that would only wait in the engine's queue.
   */
  room(queue: QueueName, stream?: Stream): Promise<number | null>;
  /**
   * Whether the run under `workflowId` (its latest, after a reset) is still running: false once it
   * ended however it ended, or when the engine knows no such run. Absent where an operator cannot
   * end a run behind the service's back (the embedded engine has no UI that terminates runs).
   */
  runOpen?(workflowId: string): Promise<boolean>;
  ready(): boolean;
  /**
   * Whether workers take this engine's work, as last checked in the background (no request waits
   * on the check). Absent: the engine runs its work in this process (embedded).
   */
  workers?(): WorkersStatus;
  stop(): Promise<void>;
}

/** Who polls the engine's task queues (Temporal: worker/temporal-pollers.ts). */
export interface WorkersStatus {
  /** none: a task queue no worker polls, whose runs wait; unknown: not checked yet, or the check failed. */
  state: 'polling' | 'none' | 'unknown';
  /** Each task queue checked, with how many workers polled it lately. */
  queues: { name: string; type: 'workflow' | 'activity'; pollers: number }[];
}

/**
 * Default lead of a scheduled message's timer run (TEMPORAL_SCHEDULE_LEAD_SECONDS): nearer mail
 * waits in the outbox, whose once-a-second look would otherwise race its own due time.
 */
export const SCHEDULE_LEAD_MS = 60_000;

/** A start with a signal named a run that has ended: nothing will act on the signal. */
export class RunEndedError extends Error {
  constructor(readonly workflowId: string) {
    super(`workflow ${workflowId} has ended; its signal has no run to wake`);
    this.name = 'RunEndedError';
  }
}
