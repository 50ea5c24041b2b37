import type { WorkflowContext } from './context';
import { defineWorkflow, DATABASE_ACTIVITY, type ActivityDef } from './definition';

export const DMARC_RAMP_WORKFLOW = 'DmarcRamp';
/**
 * The operator's request (advance, back or stop). Signals carry no payload and a body waits on one
 * name at a time, so what was asked and by whom is in dmarc_ramps.requested; the signal wakes the run.
 */
export const DMARC_REQUEST_SIGNAL = 'request';

/** One ramp per domain. */
export const dmarcRampWorkflowId = (domainId: string) => `dmarc-ramp:${domainId}`;

// The activity contract: activities/dmarc-ramp.ts implements it.
export interface CheckDmarcGateResult {
  /** stopped: the ramp was stopped, or its domain deleted. */
  state: 'running' | 'stopped';
  holds: boolean;
  /** A request waits in the database (its signal lost, or sent before the run started). */
  requested: boolean;
}

export interface ApplyDmarcRequestResult {
  state: 'running' | 'stopped';
  /** What the pending request did: none when there was none. */
  applied: 'none' | 'advanced' | 'refused' | 'back' | 'stopped';
}

export interface DmarcRampActivities {
  /** Decides the gate from the reports and records the verdict; `atMs` is the workflow's time when it has one. */
  checkDmarcGate(domainId: string, atMs: number | null): Promise<CheckDmarcGateResult>;
  /** Applies the pending request in one transaction: an advance only when the gate holds there and then. Audited. */
  applyDmarcRequest(domainId: string, atMs: number | null): Promise<ApplyDmarcRequestResult>;
}

export interface DmarcRampInput {
  domainId: string;
  /** Between two gate checks: a day. */
  checkIntervalMs: number;
}

export interface DmarcRampResult {
  outcome: 'stopped';
  checks: number;
  requests: number;
}

export const dmarcRampActivityDefs: Record<keyof DmarcRampActivities, ActivityDef> = {
  checkDmarcGate: DATABASE_ACTIVITY,
  applyDmarcRequest: DATABASE_ACTIVITY,
};

export const DMARC_CHECK_INTERVAL_MS = 86_400_000;

/**
 * The DMARC policy ramp (none → quarantine → reject, RFC 7489 §6.3): re-checks the gate daily so
 * the page shows a fresh verdict, and applies the operator's requests as they come. Whether an
 * advance is allowed is the database's decision in applyDmarcRequest, never this body's.
 */
export async function dmarcRampWorkflow(ctx: WorkflowContext<DmarcRampActivities>, input: DmarcRampInput): Promise<DmarcRampResult> {
  const a = ctx.activities;
  const at = () => ctx.activityTime?.() ?? null;
  let checks = 0;
  let requests = 0;
  for (;;) {
    const gate = await a.checkDmarcGate(input.domainId, at());
    checks++;
    if (gate.state === 'stopped') return { outcome: 'stopped', checks, requests };
    const wakeAt = (await ctx.now()) + input.checkIntervalMs;
    if (gate.requested || (await ctx.waitForSignal(DMARC_REQUEST_SIGNAL, wakeAt))) {
      const applied = await a.applyDmarcRequest(input.domainId, at());
      requests++;
      if (applied.state === 'stopped') return { outcome: 'stopped', checks, requests };
    }
  }
}

export const dmarcRamp = defineWorkflow({
  name: DMARC_RAMP_WORKFLOW,
  body: dmarcRampWorkflow,
  activities: dmarcRampActivityDefs,
  signals: [DMARC_REQUEST_SIGNAL],
  // Not queued: the run sleeps for weeks between requests.
  queue: null,
});
