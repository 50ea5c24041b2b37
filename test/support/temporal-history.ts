import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import type { temporal } from '@temporalio/proto';

/** A Temporal payload as the default data converter writes it (json/plain). */
function payload(value: unknown) {
  return {
    metadata: { encoding: Buffer.from('json/plain').toString('base64') },
    data: Buffer.from(JSON.stringify(value)).toString('base64'),
  };
}

export interface Ref {
  eventId: number;
}
export interface ActivityRef extends Ref {
  activityId: string;
  type: string;
}
export interface TimerRef extends Ref {
  timerId: string;
}

/**
 * Composes a workflow history event by event, in the JSON form `temporal workflow show -o json`
 * prints, so `historyFromJSON` and `Worker.runReplayHistory` treat it like one a server recorded.
 * Ids follow the TypeScript SDK's numbering: activity and timer ids are per-kind sequence numbers
 * starting at 1, each command's event names the workflow task that issued it.
 */
export class HistoryBuilder {
  private readonly events: Record<string, unknown>[] = [];
  private clock: number;
  private activitySeq = 0;
  private timerSeq = 0;
  private lastWftCompleted = 0;

  constructor(
    readonly workflowType: string,
    readonly taskQueue: string,
    input: unknown[],
    startMs = Date.UTC(2026, 10, 22, 12, 0, 0),
  ) {
    this.clock = startMs;
    this.add('WorkflowExecutionStarted', {
      workflowType: { name: workflowType },
      taskQueue: { name: taskQueue, kind: 'TASK_QUEUE_KIND_NORMAL' },
      input: { payloads: input.map(payload) },
      workflowTaskTimeout: '10s',
      originalExecutionRunId: 'run-1',
      firstExecutionRunId: 'run-1',
      attempt: 1,
      identity: 'history-builder',
    });
  }

  /** Current virtual time, which is what `Date.now()` returns inside the next workflow task. */
  get now(): number {
    return this.clock;
  }

  advance(ms: number): this {
    this.clock += ms;
    return this;
  }

  private add(type: string, attrs: Record<string, unknown>): number {
    const eventId = this.events.length + 1;
    const key = type[0].toLowerCase() + type.slice(1) + 'EventAttributes';
    this.events.push({
      eventId: String(eventId),
      eventTime: new Date(this.clock).toISOString(),
      eventType: type,
      taskId: String(1048576 + eventId),
      [key]: attrs,
    });
    return eventId;
  }

  /** A workflow task: scheduled, started (its time is the workflow's `now`), completed. */
  workflowTask(): this {
    const scheduled = this.add('WorkflowTaskScheduled', {
      taskQueue: { name: this.taskQueue, kind: 'TASK_QUEUE_KIND_NORMAL' },
      startToCloseTimeout: '10s',
      attempt: 1,
    });
    const started = this.add('WorkflowTaskStarted', {
      scheduledEventId: String(scheduled),
      identity: 'history-builder',
      requestId: `req-${scheduled}`,
    });
    this.lastWftCompleted = this.add('WorkflowTaskCompleted', {
      scheduledEventId: String(scheduled),
      startedEventId: String(started),
      identity: 'history-builder',
    });
    return this;
  }

  /** The last workflow task stays open: what a history looks like mid-run. */
  openWorkflowTask(): this {
    const scheduled = this.add('WorkflowTaskScheduled', {
      taskQueue: { name: this.taskQueue, kind: 'TASK_QUEUE_KIND_NORMAL' },
      startToCloseTimeout: '10s',
      attempt: 1,
    });
    this.add('WorkflowTaskStarted', { scheduledEventId: String(scheduled), identity: 'history-builder', requestId: `req-${scheduled}` });
    return this;
  }

  scheduleActivity(type: string, args: unknown[], taskQueue = this.taskQueue): ActivityRef {
    const activityId = String(++this.activitySeq);
    const eventId = this.add('ActivityTaskScheduled', {
      activityId,
      activityType: { name: type },
      taskQueue: { name: taskQueue, kind: 'TASK_QUEUE_KIND_NORMAL' },
      input: { payloads: args.map(payload) },
      startToCloseTimeout: '60s',
      workflowTaskCompletedEventId: String(this.lastWftCompleted),
    });
    return { eventId, activityId, type };
  }

  /** Started (on its final attempt; earlier attempts leave no events) and completed. */
  completeActivity(ref: ActivityRef, result: unknown, attempt = 1): this {
    const started = this.add('ActivityTaskStarted', { scheduledEventId: String(ref.eventId), identity: 'history-builder', attempt });
    this.add('ActivityTaskCompleted', {
      scheduledEventId: String(ref.eventId),
      startedEventId: String(started),
      result: { payloads: [payload(result)] },
      identity: 'history-builder',
    });
    return this;
  }

  failActivity(ref: ActivityRef, failure: { type: string; message: string; nonRetryable: boolean }, attempt = 1): this {
    const started = this.add('ActivityTaskStarted', { scheduledEventId: String(ref.eventId), identity: 'history-builder', attempt });
    this.add('ActivityTaskFailed', {
      scheduledEventId: String(ref.eventId),
      startedEventId: String(started),
      failure: {
        message: failure.message,
        source: 'TypeScriptSDK',
        applicationFailureInfo: { type: failure.type, nonRetryable: failure.nonRetryable },
      },
      retryState: failure.nonRetryable ? 'RETRY_STATE_NON_RETRYABLE_FAILURE' : 'RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED',
      identity: 'history-builder',
    });
    return this;
  }

  startTimer(ms: number): TimerRef {
    const timerId = String(++this.timerSeq);
    const eventId = this.add('TimerStarted', {
      timerId,
      startToFireTimeout: `${ms / 1000}s`,
      workflowTaskCompletedEventId: String(this.lastWftCompleted),
    });
    return { eventId, timerId };
  }

  fireTimer(ref: TimerRef): this {
    this.add('TimerFired', { timerId: ref.timerId, startedEventId: String(ref.eventId) });
    return this;
  }

  cancelTimer(ref: TimerRef): this {
    this.add('TimerCanceled', {
      timerId: ref.timerId,
      startedEventId: String(ref.eventId),
      workflowTaskCompletedEventId: String(this.lastWftCompleted),
      identity: 'history-builder',
    });
    return this;
  }

  signal(name: string, args: unknown[] = []): this {
    this.add('WorkflowExecutionSignaled', { signalName: name, input: { payloads: args.map(payload) }, identity: 'history-builder' });
    return this;
  }

  /** What the UI's "Request Cancellation" (or `temporal workflow cancel`) adds. */
  cancelRequested(): this {
    this.add('WorkflowExecutionCancelRequested', { identity: 'history-builder' });
    return this;
  }

  /** The run ended canceled (its body unwound). */
  canceled(): this {
    this.add('WorkflowExecutionCanceled', { workflowTaskCompletedEventId: String(this.lastWftCompleted) });
    return this;
  }

  complete(result: unknown): this {
    this.add('WorkflowExecutionCompleted', {
      result: { payloads: [payload(result)] },
      workflowTaskCompletedEventId: String(this.lastWftCompleted),
    });
    return this;
  }

  toJSON(): { events: Record<string, unknown>[] } {
    return { events: this.events.map((e) => structuredClone(e)) };
  }

  history(): temporal.api.history.v1.IHistory {
    return historyFromJSON(this.toJSON());
  }
}
