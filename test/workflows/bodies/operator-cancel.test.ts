import assert from 'node:assert/strict';
import { WORKFLOWS } from '../../../workflows';
import { automationRun, AUTOMATION_WAKE_SIGNAL } from '../../../workflows/automation-run';
import { broadcastFanOut, BROADCAST_CANCEL_SIGNAL } from '../../../workflows/broadcast';
import { dkimRotation, DKIM_CANCEL_SIGNAL } from '../../../workflows/dkim-rotation';
import { sendEmail } from '../../../workflows/send-email';
import type { WorkflowContext } from '../../../workflows/context';

/** A context whose only use is the activity an operator's cancellation calls, answering `answer`. */
function ctxWith<A>(name: string, answer: unknown, calls: unknown[][]): WorkflowContext<A> {
  const activities = new Proxy(
    {},
    {
      get:
        (_t, prop) =>
        async (...args: unknown[]) => {
          assert.equal(prop, name, `only ${name} is called`);
          calls.push(args);
          return answer;
        },
    },
  ) as A;
  const never = async () => assert.fail('an operator cancellation neither waits nor sleeps');
  return { now: async () => 0, sleepUntil: never, waitForSignal: never, activities };
}

/**
 * What an operator's cancellation of a run in the Temporal UI means for each workflow
 * (WorkflowDef.onCancel, run by workflows/temporal/binding.ts): the database is asked first, as
 * the API's cancel asks it, and only a cancel it agreed to ends the body's waits.
 */
describe("Workflow bodies: an operator's cancellation settles in the database first", () => {
  it('BroadcastFanOut: the broadcast canceled as the API cancels it ends the scheduled wait; one the database keeps ends nothing', async () => {
    const calls: unknown[][] = [];
    assert.deepEqual(
      await broadcastFanOut.onCancel!(ctxWith('cancelBroadcastForOperator', true, calls), { broadcastId: 'b1', scheduledAtMs: null }),
      [BROADCAST_CANCEL_SIGNAL],
    );
    assert.deepEqual(calls, [['b1']]);
    assert.deepEqual(
      await broadcastFanOut.onCancel!(ctxWith('cancelBroadcastForOperator', false, []), { broadcastId: 'b1', scheduledAtMs: null }),
      [],
    );
  });

  it('AutomationRun: the run canceled is woken, as after the API cancel; a finished run is left', async () => {
    const calls: unknown[][] = [];
    assert.deepEqual(await automationRun.onCancel!(ctxWith('cancelRunForOperator', true, calls), { runId: 'r1' }), [
      AUTOMATION_WAKE_SIGNAL,
    ]);
    assert.deepEqual(calls, [['r1']]);
    assert.deepEqual(await automationRun.onCancel!(ctxWith('cancelRunForOperator', false, []), { runId: 'r1' }), []);
  });

  it('DkimRotation: the pending key is abandoned (a no-op once switched) and the wait between checks ends', async () => {
    const calls: unknown[][] = [];
    const input = { domainId: 'd1', keyId: 'k1', checkIntervalMs: 1, requiredChecks: 3, minSpreadMs: 0, windowMs: 1, retiringMs: 1 };
    assert.deepEqual(await dkimRotation.onCancel!(ctxWith('abandonDkimKey', undefined, calls), input as never), [DKIM_CANCEL_SIGNAL]);
    assert.deepEqual(calls, [['k1']]);
  });

  it('every other workflow runs on: its state changes through the API, which a cancel in the engine cannot reach', () => {
    const settled = WORKFLOWS.filter((w) => w.onCancel).map((w) => w.name);
    assert.deepEqual(settled.sort(), [automationRun.name, broadcastFanOut.name, dkimRotation.name, sendEmail.name].sort());
  });
});
