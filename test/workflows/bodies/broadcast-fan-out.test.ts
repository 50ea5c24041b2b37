import assert from 'node:assert/strict';
import type { WorkflowContext } from '../../../workflows/context';
import {
  broadcastWorkflow,
  BROADCAST_PAGE_SIZE,
  BROADCAST_CANCEL_SIGNAL,
  type BroadcastActivities,
  type FreezeResult,
  type PageResult,
} from '../../../workflows/broadcast';

describe('Workflow body: BroadcastFanOut', () => {
  /**
   * A broadcast as the activities keep it: its state, its frozen audience and the cursor, and every
   * position accepted (a position accepted twice would be a duplicate message). `stopAt`: the page
   * starting there answers `stopped` (a cancel or failure that landed meanwhile); `crashAfter`:
   * the run dies after that many pages were stored, before the last one's answer was recorded.
   */
  function broadcast(opts: {
    recipients: number;
    state?: FreezeResult['state'];
    stopAt?: { from: number; stopped: 'canceled' | 'failed' };
    crashAfter?: number;
  }) {
    const db: { state: FreezeResult['state'] | 'queued'; recipients: number; cursor: number; accepted: number[] } = {
      state: opts.state ?? 'queued',
      recipients: 0,
      cursor: 0,
      accepted: [],
    };
    let clock = 1_000;
    let stored = 0;
    const calls: string[] = [];
    const sleeps: number[] = [];
    const ctx: WorkflowContext<BroadcastActivities> = {
      now: async () => clock,
      sleepUntil: async (t) => {
        sleeps.push(t);
        clock = Math.max(clock, t);
      },
      // The scheduled wait is a wait for the cancel signal until the time; none arrives here.
      waitForSignal: async (name, deadline) => {
        assert.equal(name, BROADCAST_CANCEL_SIGNAL);
        sleeps.push(deadline);
        clock = Math.max(clock, deadline);
        return false;
      },
      activities: {
        freezeAudience: async (id) => {
          calls.push(`freezeAudience@${clock}`);
          assert.equal(id, 'b1');
          if (db.state === 'queued') {
            db.state = 'sending';
            db.recipients = opts.recipients;
          }
          return { state: db.state, recipients: db.recipients, next: db.cursor };
        },
        enqueuePage: async (id, from, pageSize): Promise<PageResult> => {
          calls.push(`enqueuePage:${from}`);
          assert.equal(id, 'b1');
          assert.equal(pageSize, BROADCAST_PAGE_SIZE);
          if (opts.stopAt?.from === from) {
            db.state = opts.stopAt.stopped;
            return { next: from, done: true, stopped: opts.stopAt.stopped };
          }
          const end = Math.min(from + pageSize, db.recipients);
          for (let p = from; p < end; p++) db.accepted.push(p);
          db.cursor = end;
          if (++stored === opts.crashAfter) throw new Error('crash: the process died before the step was recorded');
          return { next: end, done: end >= db.recipients, stopped: null };
        },
        finishFanOut: async () => void calls.push('finishFanOut'),
        cancelBroadcastForOperator: async () => (calls.push('cancelBroadcastForOperator'), true),
      },
    };
    return { ctx, db, calls, sleeps };
  }

  it('freezes the audience at once when not scheduled, then pages through the cursor and finishes', async () => {
    const b = broadcast({ recipients: 2500 });
    assert.deepEqual(await broadcastWorkflow(b.ctx, { broadcastId: 'b1', scheduledAtMs: null }), {
      status: 'sending',
      recipients: 2500,
      pages: 3,
    });
    assert.deepEqual(b.calls, ['freezeAudience@1000', 'enqueuePage:0', 'enqueuePage:1000', 'enqueuePage:2000', 'finishFanOut']);
    assert.deepEqual(b.sleeps, []);
    assert.equal(b.db.accepted.length, 2500);
  });

  it('sleeps until scheduledAtMs only when it is in the future', async () => {
    const ahead = broadcast({ recipients: 10 });
    await broadcastWorkflow(ahead.ctx, { broadcastId: 'b1', scheduledAtMs: 50_000 });
    assert.deepEqual(ahead.sleeps, [50_000]);
    assert.equal(ahead.calls[0], 'freezeAudience@50000', 'the audience is frozen at the scheduled time, not before');

    for (const scheduledAtMs of [500, 1_000]) {
      const due = broadcast({ recipients: 10 });
      await broadcastWorkflow(due.ctx, { broadcastId: 'b1', scheduledAtMs });
      assert.deepEqual(due.sleeps, [], `scheduled at ${scheduledAtMs} with the clock at 1000: no wait`);
      assert.deepEqual(due.calls, ['freezeAudience@1000', 'enqueuePage:0', 'finishFanOut']);
    }
  });

  it('resumes at the frozen cursor after a crash, never accepting an earlier page again', async () => {
    const b = broadcast({ recipients: 2500, crashAfter: 2 });
    await assert.rejects(broadcastWorkflow(b.ctx, { broadcastId: 'b1', scheduledAtMs: null }), /crash/);
    assert.equal(b.db.cursor, 2000, 'the second page was stored and moved the cursor');
    assert.ok(!b.calls.includes('finishFanOut'));
    b.calls.length = 0;

    // Run again (a new run, or the step run again): the freeze answers `sending` and the cursor.
    assert.deepEqual(await broadcastWorkflow(b.ctx, { broadcastId: 'b1', scheduledAtMs: null }), {
      status: 'sending',
      recipients: 2500,
      pages: 1,
    });
    assert.deepEqual(b.calls, ['freezeAudience@1000', 'enqueuePage:2000', 'finishFanOut']);
    assert.equal(new Set(b.db.accepted).size, b.db.accepted.length, 'no position accepted twice');
    assert.equal(b.db.accepted.length, 2500);
  });

  it('stops at a page answering stopped, without finishFanOut', async () => {
    for (const stopped of ['canceled', 'failed'] as const) {
      const b = broadcast({ recipients: 2500, stopAt: { from: 1000, stopped } });
      assert.deepEqual(await broadcastWorkflow(b.ctx, { broadcastId: 'b1', scheduledAtMs: null }), {
        status: stopped,
        recipients: 2500,
        pages: 2,
      });
      assert.deepEqual(b.calls, ['freezeAudience@1000', 'enqueuePage:0', 'enqueuePage:1000']);
      assert.equal(b.db.accepted.length, 1000, 'only the page before the stop was accepted');
    }
  });

  it('ends without a page when the freeze answers canceled, failed or sent', async () => {
    for (const state of ['canceled', 'failed', 'sent'] as const) {
      const b = broadcast({ recipients: 2500, state });
      assert.deepEqual(await broadcastWorkflow(b.ctx, { broadcastId: 'b1', scheduledAtMs: 50_000 }), {
        status: state,
        recipients: 0,
        pages: 0,
      });
      assert.deepEqual(b.calls, ['freezeAudience@50000'], `${state}: no page, no finishFanOut`);
    }
  });
});
