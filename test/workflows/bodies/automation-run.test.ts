import assert from 'node:assert/strict';
import type { WorkflowContext } from '../../../workflows/context';
import {
  automationRunWorkflow,
  AUTOMATION_WAKE_SIGNAL,
  PARK_AFTER_MS,
  parseStepPath,
  type AutomationRunActivities,
  type BeginRunResult,
  type RunStep,
  type StepOutcome,
} from '../../../workflows/automation-run';

describe('Workflow body: AutomationRun', () => {
  const GO: StepOutcome = { go: true };
  const CANCELED: StepOutcome = { go: false, status: 'canceled', reason: 'canceled' };

  /**
   * A run as its activities answer it. Every activity answers `go` unless `on` overrides it; endWait
   * answers `timeout` when the deadline passed and `event` when woken. `wakes`: when wake signals
   * arrive (a wake sent while the run is not waiting is kept, as both engines keep signals, and
   * taken by the next wait at once). Calls are recorded as `activity:path` (with the time or the
   * flag the body passed). `resumeAfter`: a later segment, beginRun answering the delay that parked it.
   */
  function automation(
    steps: RunStep[],
    opts: { status?: BeginRunResult['status']; resumeAfter?: string; wakes?: number[]; on?: Partial<AutomationRunActivities> } = {},
  ) {
    let clock = 1_000;
    const wakes = [...(opts.wakes ?? [])];
    const calls: string[] = [];
    const waits: { deadline: number; woke: boolean; at: number }[] = [];
    const on = opts.on ?? {};
    const ctx: WorkflowContext<AutomationRunActivities> = {
      now: async () => clock,
      sleepUntil: async () => assert.fail('every wait of a run must be cancelable by the wake signal'),
      waitForSignal: async (name, deadline) => {
        assert.equal(name, AUTOMATION_WAKE_SIGNAL);
        const woke = wakes.length > 0 && wakes[0] < deadline;
        clock = woke ? Math.max(clock, wakes.shift()!) : Math.max(clock, deadline);
        waits.push({ deadline, woke, at: clock });
        return woke;
      },
      activities: {
        beginRun: async (runId) => {
          calls.push('beginRun');
          assert.equal(runId, 'r1');
          return { status: opts.status ?? 'running', steps, resumeAfter: opts.resumeAfter ?? null };
        },
        parkRun: async (runId, path, untilMs) => (calls.push(`parkRun:${path}@${untilMs}`), on.parkRun?.(runId, path, untilMs) ?? GO),
        enterDelay: async (runId, path, untilMs) => (
          calls.push(`enterDelay:${path}@${untilMs}`),
          on.enterDelay?.(runId, path, untilMs) ?? GO
        ),
        checkRun: async (runId) => (calls.push(`checkRun@${clock}`), on.checkRun?.(runId) ?? GO),
        finishDelay: async (runId, path) => (calls.push(`finishDelay:${path}@${clock}`), on.finishDelay?.(runId, path) ?? GO),
        sendEmailStep: async (runId, path) => (calls.push(`sendEmailStep:${path}`), on.sendEmailStep?.(runId, path) ?? GO),
        beginWait: async (runId, path, deadlineMs) => (
          calls.push(`beginWait:${path}@${deadlineMs}`),
          on.beginWait?.(runId, path, deadlineMs) ?? GO
        ),
        endWait: async (runId, path, deadlinePassed) => {
          calls.push(`endWait:${path}:${deadlinePassed ? 'deadline' : 'woken'}@${clock}`);
          return on.endWait?.(runId, path, deadlinePassed) ?? { outcome: GO, result: deadlinePassed ? 'timeout' : 'event' };
        },
        conditionStep: async (runId, path) => (
          calls.push(`conditionStep:${path}`),
          on.conditionStep?.(runId, path) ?? { outcome: GO, branch: 'then' }
        ),
        updateContactStep: async (runId, path) => (calls.push(`updateContactStep:${path}`), on.updateContactStep?.(runId, path) ?? GO),
        finishRun: async (_runId, status, reason) => void calls.push(`finishRun:${status}:${reason}`),
        cancelRunForOperator: async () => (calls.push('cancelRunForOperator'), true),
      },
    };
    const input = opts.resumeAfter === undefined ? { runId: 'r1' } : { runId: 'r1', segment: 1 };
    return { run: () => automationRunWorkflow(ctx, input), calls, waits, clock: () => clock };
  }

  it("runs every step type in order, each under its path (a branch's steps under the condition's)", async () => {
    const a = automation(
      [
        { type: 'delay', seconds: 30 },
        { type: 'send_email' },
        { type: 'wait_for_event', event: 'activated', timeout_seconds: 3600 },
        { type: 'condition', then: [{ type: 'update_contact' }, { type: 'send_email' }], else: [{ type: 'send_email' }] },
        { type: 'update_contact' },
      ],
      // The event comes 10 min into the wait, which began when the delay ended.
      { wakes: [31_000 + 600_000] },
    );
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 7 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'enterDelay:steps[0]@31000',
      'finishDelay:steps[0]@31000',
      'sendEmailStep:steps[1]',
      'beginWait:steps[2]@3631000',
      'endWait:steps[2]:woken@631000',
      'conditionStep:steps[3]',
      'updateContactStep:steps[3].then[0]',
      'sendEmailStep:steps[3].then[1]',
      'updateContactStep:steps[4]',
      'finishRun:completed:null',
    ]);
    assert.deepEqual(a.waits, [
      { deadline: 31_000, woke: false, at: 31_000 },
      { deadline: 3_631_000, woke: true, at: 631_000 },
    ]);
  });

  it('a wait_for_event nobody resumes ends at its deadline (endWait told the deadline passed), and the run goes on', async () => {
    const a = automation([{ type: 'wait_for_event', event: 'activated', timeout_seconds: 60 }, { type: 'send_email' }]);
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 2 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'beginWait:steps[0]@61000',
      'endWait:steps[0]:deadline@61000',
      'sendEmailStep:steps[1]',
      'finishRun:completed:null',
    ]);
  });

  it('a condition choosing else runs the else branch under its path; no else branch: straight to the next step', async () => {
    const cond: RunStep = { type: 'condition', then: [{ type: 'send_email' }], else: [{ type: 'update_contact' }, { type: 'send_email' }] };
    const a = automation([cond, { type: 'update_contact' }], { on: { conditionStep: async () => ({ outcome: GO, branch: 'else' }) } });
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 4 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'conditionStep:steps[0]',
      'updateContactStep:steps[0].else[0]',
      'sendEmailStep:steps[0].else[1]',
      'updateContactStep:steps[1]',
      'finishRun:completed:null',
    ]);

    const bare = automation([{ type: 'condition', then: [{ type: 'send_email' }] }, { type: 'send_email' }], {
      on: { conditionStep: async () => ({ outcome: GO, branch: 'else' }) },
    });
    assert.deepEqual(await bare.run(), { status: 'completed', reason: null, steps: 2 });
    assert.deepEqual(bare.calls, ['beginRun', 'conditionStep:steps[0]', 'sendEmailStep:steps[1]', 'finishRun:completed:null']);
  });

  it('a send_email answering stop (contact unsubscribed) ends the run completed with the reason, no later step', async () => {
    const a = automation([{ type: 'update_contact' }, { type: 'send_email' }, { type: 'delay', seconds: 60 }, { type: 'send_email' }], {
      on: { sendEmailStep: async () => ({ go: false, status: 'completed', reason: 'contact_unsubscribed' }) },
    });
    assert.deepEqual(await a.run(), { status: 'completed', reason: 'contact_unsubscribed', steps: 2 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'updateContactStep:steps[0]',
      'sendEmailStep:steps[1]',
      'finishRun:completed:contact_unsubscribed',
    ]);
    assert.deepEqual(a.waits, []);
  });

  it('a stop inside a branch ends the whole run, not just the branch; a refused send fails it with the reason', async () => {
    const a = automation([{ type: 'condition', then: [{ type: 'send_email' }, { type: 'update_contact' }] }, { type: 'update_contact' }], {
      on: { sendEmailStep: async (_r, path) => ({ go: false, status: 'failed', reason: `${path}: template_not_found` }) },
    });
    assert.deepEqual(await a.run(), { status: 'failed', reason: 'steps[0].then[0]: template_not_found', steps: 2 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'conditionStep:steps[0]',
      'sendEmailStep:steps[0].then[0]',
      'finishRun:failed:steps[0].then[0]: template_not_found',
    ]);

    // The condition itself can stop the run (the contact was deleted): no branch runs.
    const gone = automation([{ type: 'condition', then: [{ type: 'send_email' }] }], {
      on: { conditionStep: async () => ({ outcome: { go: false, status: 'completed', reason: 'contact_deleted' }, branch: 'else' }) },
    });
    assert.deepEqual(await gone.run(), { status: 'completed', reason: 'contact_deleted', steps: 1 });
    assert.deepEqual(gone.calls, ['beginRun', 'conditionStep:steps[0]', 'finishRun:completed:contact_deleted']);
  });

  it('a spurious wake during wait_for_event (endWait pending) waits again until the same deadline', async () => {
    let ends = 0;
    const a = automation([{ type: 'wait_for_event', event: 'activated', timeout_seconds: 60 }, { type: 'send_email' }], {
      wakes: [5_000],
      on: {
        endWait: async (_r, _p, deadlinePassed) => {
          ends++;
          if (ends === 1) assert.equal(deadlinePassed, false);
          return { outcome: GO, result: ends === 1 ? 'pending' : 'timeout' };
        },
      },
    });
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 2 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'beginWait:steps[0]@61000',
      'endWait:steps[0]:woken@5000',
      'endWait:steps[0]:deadline@61000',
      'sendEmailStep:steps[1]',
      'finishRun:completed:null',
    ]);
    assert.deepEqual(a.waits, [
      { deadline: 61_000, woke: true, at: 5_000 },
      { deadline: 61_000, woke: false, at: 61_000 },
    ]);
  });

  it('a cancel during wait_for_event: endWait answers canceled and the run ends canceled', async () => {
    const a = automation([{ type: 'wait_for_event', event: 'activated', timeout_seconds: 60 }, { type: 'send_email' }], {
      wakes: [5_000],
      on: { endWait: async () => ({ outcome: CANCELED, result: 'pending' }) },
    });
    assert.deepEqual(await a.run(), { status: 'canceled', reason: 'canceled', steps: 1 });
    assert.deepEqual(a.calls, ['beginRun', 'beginWait:steps[0]@61000', 'endWait:steps[0]:woken@5000', 'finishRun:canceled:canceled']);
  });

  it('a cancel during a delay: the wake, checkRun answers canceled, no finishDelay and no later step', async () => {
    const a = automation([{ type: 'delay', seconds: 50 }, { type: 'send_email' }], {
      wakes: [30_000],
      on: { checkRun: async () => CANCELED },
    });
    assert.deepEqual(await a.run(), { status: 'canceled', reason: 'canceled', steps: 1 });
    assert.deepEqual(a.calls, ['beginRun', 'enterDelay:steps[0]@51000', 'checkRun@30000', 'finishRun:canceled:canceled']);
    assert.deepEqual(a.waits, [{ deadline: 51_000, woke: true, at: 30_000 }]);
  });

  it('a wake during a delay that is not a cancel (checkRun go) sleeps on until the same end', async () => {
    const a = automation([{ type: 'delay', seconds: 50 }, { type: 'send_email' }], { wakes: [30_000] });
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 2 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'enterDelay:steps[0]@51000',
      'checkRun@30000',
      'finishDelay:steps[0]@51000',
      'sendEmailStep:steps[1]',
      'finishRun:completed:null',
    ]);
    assert.deepEqual(
      a.waits.map((w) => w.deadline),
      [51_000, 51_000],
    );
  });

  it('a run canceled before its delay began (enterDelay answers canceled) never waits', async () => {
    const a = automation([{ type: 'delay', seconds: 30 }], { on: { enterDelay: async () => CANCELED } });
    assert.deepEqual(await a.run(), { status: 'canceled', reason: 'canceled', steps: 1 });
    assert.deepEqual(a.calls, ['beginRun', 'enterDelay:steps[0]@31000', 'finishRun:canceled:canceled']);
    assert.deepEqual(a.waits, []);
  });

  it('a run that ended before it began (canceled) does nothing, not even finishRun', async () => {
    const a = automation([{ type: 'send_email' }], { status: 'canceled' });
    assert.deepEqual(await a.run(), { status: 'canceled', reason: null, steps: 0 });
    assert.deepEqual(a.calls, ['beginRun']);
  });

  it('a long delay parks the run: parkRun until now + the delay, the segment ends parked, no finishRun, nothing after', async () => {
    const a = automation([{ type: 'send_email' }, { type: 'delay', seconds: 86_400 }, { type: 'send_email' }]);
    assert.deepEqual(await a.run(), { status: 'parked', reason: null, steps: 2 });
    assert.deepEqual(a.calls, ['beginRun', 'sendEmailStep:steps[0]', `parkRun:steps[1]@${1_000 + 86_400_000}`]);
    assert.deepEqual(a.waits, [], 'a parked delay is no timer');

    // Parking inside a branch ends the whole segment too (the step after the condition waits for the next one).
    const inBranch = automation([
      { type: 'condition', then: [{ type: 'delay', seconds: 86_400 }, { type: 'update_contact' }] },
      { type: 'send_email' },
    ]);
    assert.deepEqual(await inBranch.run(), { status: 'parked', reason: null, steps: 2 });
    assert.deepEqual(inBranch.calls, ['beginRun', 'conditionStep:steps[0]', `parkRun:steps[0].then[0]@${1_000 + 86_400_000}`]);
  });

  it('PARK_AFTER_MS is the boundary: a delay just under it is a timer, one of exactly it parks', async () => {
    const s = PARK_AFTER_MS / 1000;
    const short = automation([{ type: 'delay', seconds: s - 1 }]);
    assert.deepEqual(await short.run(), { status: 'completed', reason: null, steps: 1 });
    assert.deepEqual(short.calls, [
      'beginRun',
      `enterDelay:steps[0]@${1_000 + (s - 1) * 1000}`,
      `finishDelay:steps[0]@${1_000 + (s - 1) * 1000}`,
      'finishRun:completed:null',
    ]);
    const exact = automation([{ type: 'delay', seconds: s }]);
    assert.deepEqual(await exact.run(), { status: 'parked', reason: null, steps: 1 });
    assert.deepEqual(exact.calls, ['beginRun', `parkRun:steps[0]@${1_000 + PARK_AFTER_MS}`]);
  });

  it('parkRun answering canceled (canceled meanwhile) ends the run canceled through finishRun, like any stop', async () => {
    const a = automation([{ type: 'delay', seconds: 86_400 }, { type: 'send_email' }], { on: { parkRun: async () => CANCELED } });
    assert.deepEqual(await a.run(), { status: 'canceled', reason: 'canceled', steps: 1 });
    assert.deepEqual(a.calls, ['beginRun', `parkRun:steps[0]@${1_000 + 86_400_000}`, 'finishRun:canceled:canceled']);
    assert.deepEqual(a.waits, []);
  });

  it('a segment resumed after a top-level delay goes on after it (the delay is not run again); a later long delay parks again', async () => {
    const a = automation([{ type: 'delay', seconds: 86_400 }, { type: 'send_email' }], { resumeAfter: 'steps[0]' });
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 1 });
    assert.deepEqual(a.calls, ['beginRun', 'sendEmailStep:steps[1]', 'finishRun:completed:null']);

    const again = automation(
      [{ type: 'delay', seconds: 86_400 }, { type: 'send_email' }, { type: 'delay', seconds: 3_600 }, { type: 'send_email' }],
      { resumeAfter: 'steps[0]' },
    );
    assert.deepEqual(await again.run(), { status: 'parked', reason: null, steps: 2 });
    assert.deepEqual(again.calls, ['beginRun', 'sendEmailStep:steps[1]', `parkRun:steps[2]@${1_000 + 3_600_000}`]);
  });

  it('a segment resumed inside a then branch runs the rest of the branch, then the steps after the condition, without conditionStep', async () => {
    const a = automation(
      [{ type: 'condition', then: [{ type: 'delay', seconds: 86_400 }, { type: 'update_contact' }] }, { type: 'send_email' }],
      { resumeAfter: 'steps[0].then[0]' },
    );
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 2 });
    assert.deepEqual(a.calls, ['beginRun', 'updateContactStep:steps[0].then[1]', 'sendEmailStep:steps[1]', 'finishRun:completed:null']);
    assert.ok(!a.calls.some((c) => c.startsWith('conditionStep')), 'the condition is not evaluated again');

    // Two levels down, in an else branch: each enclosing list goes on after its condition.
    const deep = automation(
      [
        { type: 'send_email' },
        {
          type: 'condition',
          then: [{ type: 'condition', else: [{ type: 'delay', seconds: 86_400 }, { type: 'send_email' }] }, { type: 'update_contact' }],
        },
        { type: 'update_contact' },
      ],
      { resumeAfter: 'steps[1].then[0].else[0]' },
    );
    assert.deepEqual(await deep.run(), { status: 'completed', reason: null, steps: 3 });
    assert.deepEqual(deep.calls, [
      'beginRun',
      'sendEmailStep:steps[1].then[0].else[1]',
      'updateContactStep:steps[1].then[1]',
      'updateContactStep:steps[2]',
      'finishRun:completed:null',
    ]);

    // A stop in the resumed branch ends the run there, as in a first segment.
    const stopped = automation(
      [{ type: 'condition', then: [{ type: 'delay', seconds: 86_400 }, { type: 'update_contact' }] }, { type: 'send_email' }],
      {
        resumeAfter: 'steps[0].then[0]',
        on: { updateContactStep: async () => ({ go: false, status: 'completed', reason: 'contact_deleted' }) },
      },
    );
    assert.deepEqual(await stopped.run(), { status: 'completed', reason: 'contact_deleted', steps: 1 });
    assert.deepEqual(stopped.calls, ['beginRun', 'updateContactStep:steps[0].then[1]', 'finishRun:completed:contact_deleted']);
  });

  it('parseStepPath reads each level of a step path and refuses anything else', () => {
    assert.deepEqual(parseStepPath('steps[2].then[10].else[0]'), [
      { branch: null, index: 2 },
      { branch: 'then', index: 10 },
      { branch: 'else', index: 0 },
    ]);
    assert.deepEqual(parseStepPath('steps[0]'), [{ branch: null, index: 0 }]);
    for (const bad of ['steps[1].foo[0]', 'x', '', 'steps[1].then[0]x', 'steps[]']) {
      assert.throws(() => parseStepPath(bad), /not a step path/, bad);
    }
  });
});
