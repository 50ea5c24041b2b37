import { HistoryBuilder, type TimerRef } from './temporal-history';
import { TASK_QUEUE } from './send-email-scenarios';
import {
  AUTOMATION_RUN_WORKFLOW,
  AUTOMATION_WAKE_SIGNAL,
  PARK_AFTER_MS,
  type AutomationRunResult,
  type BeginRunResult,
  type RunStep,
  type StepOutcome,
} from '../../workflows/automation-run';

/**
 * AutomationRun as Temporal histories, replayed through the real worker by
 * test/workflows/temporal-replay.test.ts. Each history is what a server records for one path of
 * the body (workflows/automation-run.ts): activity results shaped as the contract says, timers
 * where the body waits for the wake signal, a wake signal where the dispatcher sends one.
 *
 * Replay matches commands by kind and sequence id only: activity types and arguments, timer
 * durations and the result are not compared (a history with sendEmailStep where the body schedules
 * updateContactStep hands that activity's result to the body). So a wrong twin changes the
 * sequence of command kinds (a timer the body starts but the history lacks, or the other way
 * round, an activity more or less than the body schedules) and must fail as nondeterminism.
 * Arguments, durations and results are still written as the body computes them; the replay test
 * checks each fixture's activity types and result against what it declares.
 */

const RUN = '019a0000-0000-7000-8000-0000000000a1';
const GO: StepOutcome = { go: true };
const CANCELED: StepOutcome = { go: false, status: 'canceled', reason: 'canceled' };

const DELAY: RunStep = { type: 'delay', seconds: 1 };
const SEND: RunStep = { type: 'send_email' };
const WAIT: RunStep = { type: 'wait_for_event', event: 'activated', timeout_seconds: 60 };
/** A day: at least PARK_AFTER_MS, so the body parks the run instead of starting a timer. */
const LONG_DELAY: RunStep = { type: 'delay', seconds: 86_400 };
if (LONG_DELAY.seconds! * 1000 < PARK_AFTER_MS) throw new Error('LONG_DELAY must park');

export interface AutomationRunReplay {
  name: string;
  /** Activities the body calls, in order. */
  activities: string[];
  result: AutomationRunResult;
  history(): HistoryBuilder;
}

/**
 * The run begins: the start event, the first workflow task, and beginRun answering `running` with
 * `steps`. A later segment (`resumeAfter` set: the delay that parked it) starts with its segment
 * number in the input.
 */
function begin(steps: RunStep[], resumeAfter: string | null = null, segment = resumeAfter === null ? 0 : 1): HistoryBuilder {
  const input = { runId: RUN, ...(segment > 0 ? { segment } : {}), transportRetryBaseSeconds: 30 };
  const h = new HistoryBuilder(AUTOMATION_RUN_WORKFLOW, TASK_QUEUE, [input]).workflowTask();
  const run: BeginRunResult = { status: 'running', steps, resumeAfter };
  return act(h, 'beginRun', [RUN], run);
}

/** One activity scheduled by the last workflow task, answered `ms` later, then the workflow task it wakes. */
function act(h: HistoryBuilder, type: string, args: unknown[], result: unknown, ms = 20): HistoryBuilder {
  const a = h.scheduleActivity(type, args);
  return h.advance(ms).completeActivity(a, result).workflowTask();
}

/** waitForSignal with nothing pending: `condition(take, deadline - now)`, a timer until the deadline. */
function waitTimer(h: HistoryBuilder, deadlineMs: number): TimerRef {
  return h.startTimer(deadlineMs - h.now);
}

/** The timer runs out: condition answers false. */
function elapse(h: HistoryBuilder, t: TimerRef, deadlineMs: number): HistoryBuilder {
  return h
    .advance(deadlineMs - h.now)
    .fireTimer(t)
    .workflowTask();
}

/** A wake arrives `afterMs` into the wait: condition answers true, and its timer is canceled first thing in the next task. */
function wake(h: HistoryBuilder, t: TimerRef, afterMs: number): HistoryBuilder {
  return h
    .advance(afterMs)
    .signal(AUTOMATION_WAKE_SIGNAL, [{ at: h.now }])
    .workflowTask()
    .cancelTimer(t);
}

/** enterDelay at the current task's time, then the timer to its end: answers the delay's end (`until`) and the timer. */
function enterDelay(h: HistoryBuilder, path: string, seconds: number): { until: number; timer: TimerRef } {
  const until = h.now + seconds * 1000;
  act(h, 'enterDelay', [RUN, path, until], GO);
  return { until, timer: waitTimer(h, until) };
}

/** beginWait at the current task's time, then the timer to its deadline. */
function beginWait(h: HistoryBuilder, path: string, timeoutSeconds: number): { deadline: number; timer: TimerRef } {
  const deadline = h.now + timeoutSeconds * 1000;
  act(h, 'beginWait', [RUN, path, deadline], GO);
  return { deadline, timer: waitTimer(h, deadline) };
}

function finish(h: HistoryBuilder, result: AutomationRunResult): HistoryBuilder {
  act(h, 'finishRun', [RUN, result.status, result.reason], null);
  return h.complete(result);
}

/** (a) delay 1 s, send_email, wait_for_event resumed by a wake (endWait answers `event`), then completed. */
function delaySendWaitEvent(opts: { delayTimer: boolean } = { delayTimer: true }): HistoryBuilder {
  const h = begin([DELAY, SEND, WAIT]);
  const until = h.now + 1000;
  act(h, 'enterDelay', [RUN, 'steps[0]', until], GO);
  // Wrong twin: no timer, as if the delay were already over when enterDelay answered.
  if (opts.delayTimer) elapse(h, waitTimer(h, until), until);
  act(h, 'finishDelay', [RUN, 'steps[0]'], GO);
  act(h, 'sendEmailStep', [RUN, 'steps[1]'], GO, 200);
  const w = beginWait(h, 'steps[2]', 60);
  wake(h, w.timer, 5_000);
  act(h, 'endWait', [RUN, 'steps[2]', false], { outcome: GO, result: 'event' });
  return finish(h, { status: 'completed', reason: null, steps: 3 });
}

/** (b) wait_for_event whose timer fires: endWait (deadline passed) answers `timeout`, then completed. */
function waitTimesOut(opts: { finishRun: boolean } = { finishRun: true }): HistoryBuilder {
  const h = begin([WAIT]);
  const w = beginWait(h, 'steps[0]', 60);
  elapse(h, w.timer, w.deadline);
  act(h, 'endWait', [RUN, 'steps[0]', true], { outcome: GO, result: 'timeout' });
  const result: AutomationRunResult = { status: 'completed', reason: null, steps: 1 };
  // Wrong twin: the run completes without recording its end.
  return opts.finishRun ? finish(h, result) : h.complete(result);
}

/** (c) canceled during a delay: the wake, checkRun answers canceled, finishRun(canceled). */
function canceledInDelay(opts: { after: 'finishRun' | 'finishDelay' } = { after: 'finishRun' }): HistoryBuilder {
  const h = begin([DELAY, SEND]);
  const d = enterDelay(h, 'steps[0]', 1);
  wake(h, d.timer, 300);
  act(h, 'checkRun', [RUN], CANCELED);
  const result: AutomationRunResult = { status: 'canceled', reason: 'canceled', steps: 1 };
  if (opts.after === 'finishRun') return finish(h, result);
  // Wrong twin: the run goes on to end its delay and send, as if the cancel were not seen (the body
  // ends where the history schedules the send).
  act(h, 'finishDelay', [RUN, 'steps[0]'], GO);
  act(h, 'sendEmailStep', [RUN, 'steps[1]'], GO);
  return finish(h, { status: 'completed', reason: null, steps: 2 });
}

/** (d) a wake for something else in the wait: endWait answers `pending`, a new timer to the same deadline, then the timeout. */
function spuriousWakeInWait(opts: { rewait: boolean } = { rewait: true }): HistoryBuilder {
  const h = begin([WAIT]);
  const w = beginWait(h, 'steps[0]', 60);
  wake(h, w.timer, 2_000);
  act(h, 'endWait', [RUN, 'steps[0]', false], { outcome: GO, result: 'pending' });
  // Wrong twin: endWait again at once, without the second wait's timer.
  if (opts.rewait) elapse(h, waitTimer(h, w.deadline), w.deadline);
  act(h, 'endWait', [RUN, 'steps[0]', opts.rewait], { outcome: GO, result: 'timeout' });
  return finish(h, { status: 'completed', reason: null, steps: 1 });
}

/**
 * (e) a wake that arrived while sendEmailStep ran (say, the second of two signals for one resume)
 * is counted, so the wait that follows takes it at once: no timer, straight to endWait, which
 * answers `pending` (beginWait cleared any earlier resume); then the timer to the deadline.
 */
function wakeBeforeWait(opts: { takenAtOnce: boolean } = { takenAtOnce: true }): HistoryBuilder {
  const h = begin([SEND, WAIT]);
  const s = h.scheduleActivity('sendEmailStep', [RUN, 'steps[0]']);
  h.advance(50)
    .signal(AUTOMATION_WAKE_SIGNAL, [{ at: h.now }])
    .workflowTask();
  h.advance(150).completeActivity(s, GO).workflowTask();
  const deadline = h.now + 60_000;
  act(h, 'beginWait', [RUN, 'steps[1]', deadline], GO);
  // Wrong twin: a timer at once, as if the wake had been lost.
  if (opts.takenAtOnce) act(h, 'endWait', [RUN, 'steps[1]', false], { outcome: GO, result: 'pending' });
  elapse(h, waitTimer(h, deadline), deadline);
  act(h, 'endWait', [RUN, 'steps[1]', true], { outcome: GO, result: 'timeout' });
  return finish(h, { status: 'completed', reason: null, steps: 2 });
}

/**
 * (f) a condition choosing `then`, update_contact in the branch, then the step after the
 * condition. Wrong twin: conditionStep answers `else` (the condition has none), yet the history
 * runs the then branch: one activity more than the body schedules.
 */
function condition(opts: { answer: 'then' | 'else' } = { answer: 'then' }): HistoryBuilder {
  const h = begin([{ type: 'condition', then: [{ type: 'update_contact' }] }, SEND]);
  act(h, 'conditionStep', [RUN, 'steps[0]'], { outcome: GO, branch: opts.answer });
  act(h, 'updateContactStep', [RUN, 'steps[0].then[0]'], GO);
  act(h, 'sendEmailStep', [RUN, 'steps[1]'], GO);
  return finish(h, { status: 'completed', reason: null, steps: 3 });
}

/**
 * (g) a first segment reaching a long delay parks: parkRun until now + the delay, and the segment
 * completes `parked` with no timer and no finishRun. Wrong twins: the old behaviour for a long
 * delay (enterDelay and a timer: the body completes where the history starts the timer), and a
 * parked segment whose history goes on to finishRun.
 */
function parkFirstSegment(opts: { as: 'park' | 'timer' | 'parkThenFinish' } = { as: 'park' }): HistoryBuilder {
  const h = begin([LONG_DELAY, SEND]);
  const until = h.now + LONG_DELAY.seconds! * 1000;
  if (opts.as === 'timer') {
    const d = enterDelay(h, 'steps[0]', LONG_DELAY.seconds!);
    elapse(h, d.timer, d.until);
    act(h, 'finishDelay', [RUN, 'steps[0]'], GO);
    act(h, 'sendEmailStep', [RUN, 'steps[1]'], GO);
    return finish(h, { status: 'completed', reason: null, steps: 2 });
  }
  act(h, 'parkRun', [RUN, 'steps[0]', until], GO);
  const result: AutomationRunResult = { status: 'parked', reason: null, steps: 1 };
  return opts.as === 'park' ? h.complete(result) : finish(h, result);
}

/** (g') parkRun answering canceled (the run was canceled meanwhile): finishRun(canceled) like any stop. */
function parkCanceled(): HistoryBuilder {
  const h = begin([LONG_DELAY, SEND]);
  act(h, 'parkRun', [RUN, 'steps[0]', h.now + LONG_DELAY.seconds! * 1000], CANCELED);
  return finish(h, { status: 'canceled', reason: 'canceled', steps: 1 });
}

/**
 * (h) the segment after that park: beginRun answers resumeAfter `steps[0]`, so the body goes on
 * with the send and finishes. Wrong twin: a history that parks again at the same delay (resume
 * ignored): the body schedules finishRun where the history completes.
 */
function resumeAfterTopLevelDelay(opts: { resumed: boolean } = { resumed: true }): HistoryBuilder {
  const h = begin([LONG_DELAY, SEND], 'steps[0]');
  if (!opts.resumed) {
    act(h, 'parkRun', [RUN, 'steps[0]', h.now + LONG_DELAY.seconds! * 1000], GO);
    return h.complete({ status: 'parked', reason: null, steps: 1 });
  }
  act(h, 'sendEmailStep', [RUN, 'steps[1]'], GO);
  return finish(h, { status: 'completed', reason: null, steps: 1 });
}

/**
 * (i) a segment resumed inside a condition's then branch (resumeAfter `steps[0].then[0]`): the
 * rest of the branch (update_contact), then the step after the condition, with no conditionStep.
 * Wrong twin: the history evaluates the condition again first: one activity more than the body.
 */
function resumeInBranch(opts: { reevaluate: boolean } = { reevaluate: false }): HistoryBuilder {
  const h = begin([{ type: 'condition', then: [LONG_DELAY, { type: 'update_contact' }] }, SEND], 'steps[0].then[0]');
  if (opts.reevaluate) act(h, 'conditionStep', [RUN, 'steps[0]'], { outcome: GO, branch: 'then' });
  act(h, 'updateContactStep', [RUN, 'steps[0].then[1]'], GO);
  act(h, 'sendEmailStep', [RUN, 'steps[1]'], GO);
  return finish(h, { status: 'completed', reason: null, steps: 2 });
}

export const automationRunReplays: AutomationRunReplay[] = [
  {
    name: 'delay, send_email, then wait_for_event resumed by a wake (event)',
    activities: ['beginRun', 'enterDelay', 'finishDelay', 'sendEmailStep', 'beginWait', 'endWait', 'finishRun'],
    result: { status: 'completed', reason: null, steps: 3 },
    history: () => delaySendWaitEvent(),
  },
  {
    name: 'wait_for_event timing out (timer fires, endWait answers timeout)',
    activities: ['beginRun', 'beginWait', 'endWait', 'finishRun'],
    result: { status: 'completed', reason: null, steps: 1 },
    history: () => waitTimesOut(),
  },
  {
    name: 'canceled during a delay (wake, checkRun answers canceled)',
    activities: ['beginRun', 'enterDelay', 'checkRun', 'finishRun'],
    result: { status: 'canceled', reason: 'canceled', steps: 1 },
    history: () => canceledInDelay(),
  },
  {
    name: 'a spurious wake in wait_for_event (endWait pending), waiting again until the timeout',
    activities: ['beginRun', 'beginWait', 'endWait', 'endWait', 'finishRun'],
    result: { status: 'completed', reason: null, steps: 1 },
    history: () => spuriousWakeInWait(),
  },
  {
    name: 'a wake that came during send_email, taken by the wait at once (endWait pending), then the timeout',
    activities: ['beginRun', 'sendEmailStep', 'beginWait', 'endWait', 'endWait', 'finishRun'],
    result: { status: 'completed', reason: null, steps: 2 },
    history: () => wakeBeforeWait(),
  },
  {
    name: 'a condition choosing then, update_contact in the branch, then send_email',
    activities: ['beginRun', 'conditionStep', 'updateContactStep', 'sendEmailStep', 'finishRun'],
    result: { status: 'completed', reason: null, steps: 3 },
    history: () => condition(),
  },
  {
    name: 'a first segment parking at a long delay (parkRun, no timer, no finishRun)',
    activities: ['beginRun', 'parkRun'],
    result: { status: 'parked', reason: null, steps: 1 },
    history: () => parkFirstSegment(),
  },
  {
    name: 'a long delay whose parkRun answers canceled, then finishRun canceled',
    activities: ['beginRun', 'parkRun', 'finishRun'],
    result: { status: 'canceled', reason: 'canceled', steps: 1 },
    history: () => parkCanceled(),
  },
  {
    name: 'a segment resumed after a top-level delay (resumeAfter steps[0]): send_email, then completed',
    activities: ['beginRun', 'sendEmailStep', 'finishRun'],
    result: { status: 'completed', reason: null, steps: 1 },
    history: () => resumeAfterTopLevelDelay(),
  },
  {
    name: 'a segment resumed inside a then branch (resumeAfter steps[0].then[0]): the branch rest, then the outer step',
    activities: ['beginRun', 'updateContactStep', 'sendEmailStep', 'finishRun'],
    result: { status: 'completed', reason: null, steps: 2 },
    history: () => resumeInBranch(),
  },
];

/** Histories that disagree with the body at one command: replay must fail with a determinism error. */
export const automationRunWrongTwins: { name: string; history(): HistoryBuilder }[] = [
  { name: 'a delay without its timer (finishDelay where the body starts one)', history: () => delaySendWaitEvent({ delayTimer: false }) },
  { name: 'a timed-out wait that completes without finishRun', history: () => waitTimesOut({ finishRun: false }) },
  { name: 'a run canceled in its delay that goes on to finishDelay and a send', history: () => canceledInDelay({ after: 'finishDelay' }) },
  { name: 'a spurious wake followed by endWait without the second timer', history: () => spuriousWakeInWait({ rewait: false }) },
  { name: 'a wait with a timer though a wake was already pending', history: () => wakeBeforeWait({ takenAtOnce: false }) },
  { name: 'a condition answering else whose history still runs the then branch', history: () => condition({ answer: 'else' }) },
  { name: 'a long delay slept on a timer (the old behaviour) where the body parks', history: () => parkFirstSegment({ as: 'timer' }) },
  { name: 'a parked segment whose history goes on to finishRun', history: () => parkFirstSegment({ as: 'parkThenFinish' }) },
  { name: 'a resumed segment whose history parks at the same delay again', history: () => resumeAfterTopLevelDelay({ resumed: false }) },
  {
    name: 'a segment resumed in a branch whose history evaluates the condition again',
    history: () => resumeInBranch({ reevaluate: true }),
  },
];
