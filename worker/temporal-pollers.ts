import { temporal } from '@temporalio/proto';
import type { Logger } from 'pino';
import type { WorkersStatus } from './engine';

/**
 * How recently a worker must have polled a task queue to count. A poll is a long poll the server
 * holds for up to a minute, and a poller's access time is when its last poll began: an idle,
 * healthy worker can look 60 s old. The rest is slack for the two machines' clocks.
 */
export const POLLED_WITHIN_MS = 70_000;

/** How often the API asks the server; the answer is kept in between. */
export const CHECK_EVERY_MS = 10_000;

type Queue = WorkersStatus['queues'][number];
type Describe = (
  request: temporal.api.workflowservice.v1.IDescribeTaskQueueRequest,
) => Promise<{ pollers?: temporal.api.taskqueue.v1.IPollerInfo[] | null }>;

const TYPES: Record<Queue['type'], temporal.api.enums.v1.TaskQueueType> = {
  workflow: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  activity: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
};

const accessMs = (p: temporal.api.taskqueue.v1.IPollerInfo) =>
  Number(p.lastAccessTime?.seconds ?? 0) * 1000 + Math.floor((p.lastAccessTime?.nanos ?? 0) / 1e6);

export interface PollerWatch {
  status(): WorkersStatus;
  stop(): void;
}

/**
 * Watches, with the server's own DescribeTaskQueue, whether workers poll the service's task
 * queues: without one, runs wait on the server and mail stays `queued` while the API accepts it.
 * The log says so once per change, not once per check.
 */
export function watchPollers(
  describe: Describe,
  namespace: string,
  queues: Omit<Queue, 'pollers'>[],
  log: Logger,
  everyMs = CHECK_EVERY_MS,
): PollerWatch {
  let status: WorkersStatus = { state: 'unknown', queues: queues.map((q) => ({ ...q, pollers: 0 })) };
  let said: 'polling' | 'none' | undefined;
  let failing = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const count = async (q: Omit<Queue, 'pollers'>): Promise<Queue> => {
    const res = await describe({
      namespace,
      taskQueue: { name: q.name, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
      taskQueueType: TYPES[q.type],
    });
    const since = Date.now() - POLLED_WITHIN_MS;
    return { ...q, pollers: (res.pollers ?? []).filter((p) => accessMs(p) >= since).length };
  };

  const check = async () => {
    let counted: Queue[];
    try {
      counted = await Promise.all(queues.map(count));
    } catch (err) {
      if (stopped) return;
      // Not taken for "no worker": the server, or this API's right to ask it, may be what is wrong.
      if (!failing) log.warn({ err }, 'temporal task queue pollers unknown: DescribeTaskQueue failed');
      failing = true;
      status = { ...status, state: 'unknown' };
      return;
    }
    if (stopped) return;
    failing = false;
    const idle = counted.filter((q) => q.pollers === 0).map((q) => q.name);
    const state = idle.length ? 'none' : 'polling';
    status = { state, queues: counted };
    if (state === 'none' && said !== 'none') {
      log.warn({ namespace, taskQueues: idle }, 'no temporal worker polling: mail stays queued until `svc worker` runs');
    } else if (state === 'polling' && said === 'none') {
      log.info({ namespace, taskQueues: queues.map((q) => q.name) }, 'temporal workers polling again');
    }
    said = state;
  };

  const loop = async () => {
    await check();
    if (stopped) return;
    timer = setTimeout(() => void loop(), everyMs);
    timer.unref();
  };
  void loop();

  return {
    status: () => status,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
