import assert from 'node:assert/strict';
import pino from 'pino';
import type { temporal } from '@temporalio/proto';
import { POLLED_WITHIN_MS, watchPollers } from '../../worker/temporal-pollers';
import { sleep, waitFor } from '../support/wait';

/**
 * The API's watch on its task queues' pollers (worker/temporal-pollers.ts) against a stand-in for
 * DescribeTaskQueue: which pollers count, what the state is, and that the log says each change
 * once. test/workflows/temporal-live-readiness.test.ts runs it against a real server.
 */
describe('Temporal pollers: whether workers poll the task queues', () => {
  const lines: { level: number; msg: string; taskQueues?: string[] }[] = [];
  const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  /** Per task queue, how many seconds ago each of its pollers last polled. */
  const polled = new Map<string, number[]>();
  // The server's timestamps carry a Long; a number reads the same.
  const ago = (seconds: number) =>
    ({ seconds: Math.floor(Date.now() / 1000) - seconds }) as unknown as temporal.api.taskqueue.v1.IPollerInfo['lastAccessTime'];
  let calls = 0;
  let failing = false;
  const describe = async (req: { taskQueue?: { name?: string | null } | null; taskQueueType?: number | null }) => {
    calls++;
    if (failing) throw new Error('UNAVAILABLE');
    const name = req.taskQueue?.name ?? '';
    return { pollers: (polled.get(name) ?? []).map((s) => ({ lastAccessTime: ago(s) })) };
  };
  const queues = [
    { name: 'svc-mail', type: 'workflow' as const },
    { name: 'svc-mail-delivery', type: 'activity' as const },
  ];
  const warned = (msg: string) => lines.filter((l) => l.level === 40 && l.msg.startsWith(msg));
  const infos = (msg: string) => lines.filter((l) => l.level === 30 && l.msg.startsWith(msg));

  it('says none while a queue has no fresh poller, polling once both have one, each change logged once', async () => {
    const watch = watchPollers(describe, 'default', queues, log, 5);
    try {
      const none = await waitFor(async () => (watch.status().state === 'none' ? watch.status() : undefined), 'none');
      assert.deepEqual(
        none.queues.map((q) => [q.name, q.type, q.pollers]),
        [
          ['svc-mail', 'workflow', 0],
          ['svc-mail-delivery', 'activity', 0],
        ],
      );
      // A poller last seen longer ago than a long poll lasts has gone; one queue polled is not enough.
      polled.set('svc-mail', [Math.ceil(POLLED_WITHIN_MS / 1000) + 5, 1]);
      polled.set('svc-mail-delivery', [Math.ceil(POLLED_WITHIN_MS / 1000) + 5]);
      await waitFor(async () => watch.status().queues[0].pollers === 1, 'the fresh poller counted');
      assert.equal(watch.status().state, 'none');
      assert.equal(watch.status().queues[1].pollers, 0);
      polled.set('svc-mail-delivery', [30]);
      await waitFor(async () => watch.status().state === 'polling', 'polling');
      const seen = calls;
      await waitFor(async () => calls > seen + 4, 'more checks');
      const missing = warned('no temporal worker polling');
      assert.equal(missing.length, 1, JSON.stringify(lines));
      assert.deepEqual(missing[0].taskQueues, ['svc-mail', 'svc-mail-delivery']);
      assert.equal(infos('temporal workers polling again').length, 1);

      // A failed check says unknown (not none), and is logged once however long it lasts.
      failing = true;
      await waitFor(async () => watch.status().state === 'unknown', 'unknown');
      const failed = calls;
      await waitFor(async () => calls > failed + 4, 'more failed checks');
      assert.equal(warned('temporal task queue pollers unknown').length, 1);
      failing = false;
      polled.delete('svc-mail-delivery');
      await waitFor(async () => watch.status().state === 'none', 'none again');
      assert.deepEqual(warned('no temporal worker polling').at(-1)?.taskQueues, ['svc-mail-delivery']);
      assert.equal(warned('no temporal worker polling').length, 2);
    } finally {
      watch.stop();
    }
    const stopped = calls;
    await sleep(50);
    assert.ok(calls <= stopped + 1, 'no check after stop (but the one under way)');
  });
});
