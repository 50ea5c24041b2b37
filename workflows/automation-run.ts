import type { WorkflowContext } from './context';
import { defineWorkflow, DATABASE_ACTIVITY, type ActivityDef } from './definition';

export const AUTOMATION_RUN_WORKFLOW = 'AutomationRun';

/**
 * The run's id is derived from its dedupe key (automation, contact, event id or trigger), so the
 * workflow id is too: starting the same occurrence twice is a no-op on either engine.
 */
export const automationRunWorkflowId = (runId: string, segment = 0) =>
  segment === 0 ? `automation-run:${runId}` : `automation-run:${runId}:${segment}`;

/**
 * A delay at least this long parks the run: the workflow ends and the run is only a database row
 * until the dispatcher starts its next segment when the delay is over. Sleeping runs then cost the
 * engine nothing (no open workflow, no memory), however many there are; shorter delays are timers.
 */
export const PARK_AFTER_MS = 60_000;

/**
 * Sent when the database recorded something the run must look at: an event that resumed its
 * wait, or a cancel. The signal carries nothing; the run asks the database what happened, so a
 * lost or repeated signal changes nothing but timing.
 */
export const AUTOMATION_WAKE_SIGNAL = 'wake';

export interface AutomationRunInput {
  runId: string;
  /** 0 for the run's start; n for its start after the n-th park. */
  segment?: number;
}

/** What the body needs of a step (the full definition lives in core/automations/definition.ts). */
export interface RunStep {
  type: 'delay' | 'send_email' | 'wait_for_event' | 'condition' | 'update_contact';
  /** delay */
  seconds?: number;
  /** wait_for_event */
  event?: string;
  timeout_seconds?: number;
  /** condition */
  then?: RunStep[];
  else?: RunStep[];
}

/** How a step left the run: it goes on, or it is over (canceled meanwhile, contact gone, a send refused). */
export type StepOutcome = { go: true } | { go: false; status: 'completed' | 'canceled' | 'failed'; reason: string | null };

// The activity contract: activities/automation-run.ts implements it.
export interface BeginRunResult {
  /** `running`: go through `steps`; anything else: the run ended before it began (canceled). */
  status: 'running' | 'waiting' | 'completed' | 'canceled' | 'failed';
  /** The steps of the version the run was started with. */
  steps: RunStep[];
  /** A segment after a park: the path of the delay that parked it (done now); the run goes on after it. */
  resumeAfter: string | null;
}

export interface AutomationRunActivities {
  /** Reads the run and its pinned definition once (after a park: records the delay as elapsed). */
  beginRun(runId: string): Promise<BeginRunResult>;
  /** Parks the run in a long delay: the dispatcher starts its next segment at `untilMs`. */
  parkRun(runId: string, path: string, untilMs: number): Promise<StepOutcome>;
  /** Records that a delay (or any step that waits in the body) began and until when. */
  enterDelay(runId: string, path: string, untilMs: number): Promise<StepOutcome>;
  /** The run after a wake during a delay: canceled, or still going. */
  checkRun(runId: string): Promise<StepOutcome>;
  /** Records the end of a delay. */
  finishDelay(runId: string, path: string): Promise<StepOutcome>;
  /** Sends the step's template to the contact through the one send path (key `automation:<run>:<path>`). */
  sendEmailStep(runId: string, path: string): Promise<StepOutcome>;
  /** Starts waiting for an event: the run is `waiting` and POST /events of that name resumes it. */
  beginWait(runId: string, path: string, deadlineMs: number): Promise<StepOutcome>;
  /**
   * Ends the wait if it is over: resumed by an event (`event`), past its deadline (`timeout`), or
   * neither yet (`pending`: a wake for something else, keep waiting). Canceled: the outcome says.
   */
  endWait(runId: string, path: string, deadlinePassed: boolean): Promise<{ outcome: StepOutcome; result: 'event' | 'timeout' | 'pending' }>;
  /** Evaluates the step's condition against the contact now. */
  conditionStep(runId: string, path: string): Promise<{ outcome: StepOutcome; branch: 'then' | 'else' }>;
  /** Applies the step's properties and topic changes to the contact. */
  updateContactStep(runId: string, path: string): Promise<StepOutcome>;
  /** The run's final state (a run already canceled keeps it). */
  finishRun(runId: string, status: 'completed' | 'canceled' | 'failed', reason: string | null): Promise<void>;
  /** An operator canceled the workflow in the engine's UI: the run is canceled as the API cancels it; answers whether it was. */
  cancelRunForOperator(runId: string): Promise<boolean>;
}

export const automationRunActivityDefs: Record<keyof AutomationRunActivities, ActivityDef> = {
  beginRun: DATABASE_ACTIVITY,
  parkRun: DATABASE_ACTIVITY,
  enterDelay: DATABASE_ACTIVITY,
  checkRun: DATABASE_ACTIVITY,
  finishDelay: DATABASE_ACTIVITY,
  sendEmailStep: DATABASE_ACTIVITY,
  beginWait: DATABASE_ACTIVITY,
  endWait: DATABASE_ACTIVITY,
  conditionStep: DATABASE_ACTIVITY,
  updateContactStep: DATABASE_ACTIVITY,
  finishRun: DATABASE_ACTIVITY,
  cancelRunForOperator: DATABASE_ACTIVITY,
};

export interface AutomationRunResult {
  /** `parked`: this segment ended in a long delay; the run goes on in the next one. */
  status: 'completed' | 'canceled' | 'failed' | 'running' | 'waiting' | 'parked';
  reason: string | null;
  /** Steps this run went through (a condition counts, and so do the steps of its branch). */
  steps: number;
}

type Ctx = WorkflowContext<AutomationRunActivities>;
type Stop = Extract<StepOutcome, { go: false }>;
/** How a list of steps ended early: the run stopped, or this segment parked. */
type Halt = Stop | { go: false; status: 'parked'; reason: null };
const PARKED: Halt = { go: false, status: 'parked', reason: null };

/** One level of a step path: `steps[2]` is {index 2}, `.then[1]` is {branch then, index 1}. */
interface PathPart {
  branch: 'then' | 'else' | null;
  index: number;
}

/** Reads a step path (`steps[2].then[1]`) into its levels; the API writes only such paths. */
export function parseStepPath(path: string): PathPart[] {
  const parts: PathPart[] = [];
  const re = /(?:^steps|\.(then|else))\[(\d+)\]/g;
  let m: RegExpExecArray | null;
  let at = 0;
  while ((m = re.exec(path)) !== null && m.index === at) {
    parts.push({ branch: (m[1] as 'then' | 'else' | undefined) ?? null, index: Number(m[2]) });
    at = re.lastIndex;
  }
  if (at !== path.length || parts.length === 0 || parts[0].branch !== null) throw new Error(`not a step path: ${path}`);
  return parts;
}

/**
 * One automation run, as the step table reads:
 *   delay           durable timer until now + duration (a cancel wakes it); a long one parks the
 *                   run (this segment ends, the next starts after the delay, after its step)
 *   send_email      the one send path, idempotency key automation:<run>:<path>
 *   wait_for_event  waiting until the event or the timeout, recording which
 *   condition       then or else, each a list run the same way
 *   update_contact  properties and topics
 * Any step may end the run: canceled meanwhile, contact deleted or unsubscribed (completed, with
 * the reason), a send the service refuses (failed).
 */
export async function automationRunWorkflow(ctx: Ctx, input: AutomationRunInput): Promise<AutomationRunResult> {
  const run = await ctx.activities.beginRun(input.runId);
  if (run.status !== 'running') return { status: run.status, reason: null, steps: 0 };
  const counter = { steps: 0 };
  const resume = run.resumeAfter === null ? null : parseStepPath(run.resumeAfter);
  const stop = await runSteps(ctx, input.runId, run.steps, 'steps', counter, resume);
  if (stop?.status === 'parked') return { status: 'parked', reason: null, steps: counter.steps };
  const status = stop?.status ?? 'completed';
  const reason = stop?.reason ?? null;
  await ctx.activities.finishRun(input.runId, status, reason);
  return { status, reason, steps: counter.steps };
}

/**
 * Runs `steps` in order. `resume` (a segment after a park) names the delay that parked it: the
 * list starts after it, entering the condition branches on its path without evaluating them again.
 */
async function runSteps(
  ctx: Ctx,
  runId: string,
  steps: RunStep[],
  prefix: string,
  counter: { steps: number },
  resume: PathPart[] | null = null,
): Promise<Halt | null> {
  const a = ctx.activities;
  let start = 0;
  if (resume) {
    const [here, ...below] = resume;
    if (below.length > 0) {
      const branch = below[0].branch!;
      const halt = await runSteps(ctx, runId, steps[here.index][branch] ?? [], `${prefix}[${here.index}].${branch}`, counter, below);
      if (halt) return halt;
    }
    start = here.index + 1;
  }
  for (let i = start; i < steps.length; i++) {
    const step = steps[i];
    const path = `${prefix}[${i}]`;
    counter.steps++;
    let outcome: StepOutcome;
    switch (step.type) {
      case 'delay': {
        const ms = (step.seconds ?? 0) * 1000;
        const until = (await ctx.now()) + ms;
        if (ms >= PARK_AFTER_MS) {
          const parked = await a.parkRun(runId, path, until);
          return parked.go ? PARKED : parked;
        }
        outcome = await delay(ctx, runId, path, until);
        break;
      }
      case 'send_email':
        outcome = await a.sendEmailStep(runId, path);
        break;
      case 'wait_for_event':
        outcome = await waitForEvent(ctx, runId, path, (await ctx.now()) + (step.timeout_seconds ?? 0) * 1000);
        break;
      case 'condition': {
        const c = await a.conditionStep(runId, path);
        if (!c.outcome.go) return c.outcome;
        const halt = await runSteps(ctx, runId, step[c.branch] ?? [], `${path}.${c.branch}`, counter);
        if (halt) return halt;
        outcome = { go: true };
        break;
      }
      case 'update_contact':
        outcome = await a.updateContactStep(runId, path);
        break;
    }
    if (!outcome.go) return outcome;
  }
  return null;
}

async function delay(ctx: Ctx, runId: string, path: string, untilMs: number): Promise<StepOutcome> {
  const a = ctx.activities;
  const entered = await a.enterDelay(runId, path, untilMs);
  if (!entered.go) return entered;
  while ((await ctx.now()) < untilMs) {
    if (!(await ctx.waitForSignal(AUTOMATION_WAKE_SIGNAL, untilMs))) break;
    const state = await a.checkRun(runId);
    if (!state.go) return state;
  }
  return a.finishDelay(runId, path);
}

async function waitForEvent(ctx: Ctx, runId: string, path: string, deadlineMs: number): Promise<StepOutcome> {
  const a = ctx.activities;
  const begun = await a.beginWait(runId, path, deadlineMs);
  if (!begun.go) return begun;
  for (;;) {
    const woke = await ctx.waitForSignal(AUTOMATION_WAKE_SIGNAL, deadlineMs);
    const end = await a.endWait(runId, path, !woke);
    if (!end.outcome.go || end.result !== 'pending') return end.outcome;
  }
}

export const automationRun = defineWorkflow({
  name: AUTOMATION_RUN_WORKFLOW,
  outcome: (r) => r.status,
  body: automationRunWorkflow,
  activities: automationRunActivityDefs,
  signals: [AUTOMATION_WAKE_SIGNAL],
  // Canceled if the database agrees (running or waiting), then woken as the API's cancel wakes it.
  onCancel: async (ctx, input) => ((await ctx.activities.cancelRunForOperator(input.runId)) ? [AUTOMATION_WAKE_SIGNAL] : []),
  // Unqueued: a run mostly sleeps; its sends take the delivery queue like any other message.
  queue: null,
});
