import type { WorkflowContext } from './context';
import { defineWorkflow, DATABASE_ACTIVITY, LONG_ATTEMPT_SECONDS, type ActivityDef } from './definition';

export const DMARC_RAMP_WORKFLOW = 'DmarcRamp';
/**
 * The operator's request (advance, back or stop). Signals carry no payload and a body waits on one
 * name at a time, so what was asked and by whom is in dmarc_ramps.requested; the signal wakes the run.
 */
export const DMARC_REQUEST_SIGNAL = 'request';

/**
 * One run per start of a domain's ramp: a ramp stopped and started again gets a new run (its id is
 * kept in dmarc_ramps.run_id, which requests signal).
 */
export const dmarcRampWorkflowId = (domainId: string, startId: string) => `dmarc-ramp:${domainId}:${startId}`;

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
  /** Who asked for it (`console:<operator>`). */
  by?: string | null;
}

export interface PublishDmarcRecordResult {
  /** not_connected: no Cloudflare zone to publish to (the operator publishes by hand); a no-op. */
  state: 'not_connected' | 'no_record' | 'pending' | 'verified' | 'conflict' | 'failed';
}

export interface DmarcRampActivities {
  /**
   * Decides the gate from the reports and records the verdict; `atMs` is the workflow's time when it
   * has one. `runId`: the run asking; stopped when the ramp's row names another run.
   */
  checkDmarcGate(domainId: string, atMs: number | null, runId?: string | null): Promise<CheckDmarcGateResult>;
  /** Applies the pending request in one transaction: an advance only when the gate holds there and then. Audited. */
  applyDmarcRequest(domainId: string, atMs: number | null, runId?: string | null): Promise<ApplyDmarcRequestResult>;
  /**
   * Publishes the domain's `_dmarc` record to its Cloudflare zone when the zone is connected; a
   * no-op otherwise. Never fails: a refusal is recorded for the page and the ramp goes on.
   */
  publishDmarcRecord(domainId: string, actor: string | null): Promise<PublishDmarcRecordResult>;
}

export interface DmarcRampInput {
  domainId: string;
  /** Between two gate checks: a day. */
  checkIntervalMs: number;
  /** This run's id (dmarc_ramps.run_id): a run the row no longer names ends. */
  runId?: string;
  /** Who started the ramp: the actor of the first publish. */
  startedBy?: string | null;
}

export interface DmarcRampResult {
  outcome: 'stopped';
  checks: number;
  requests: number;
}

export const dmarcRampActivityDefs: Record<keyof DmarcRampActivities, ActivityDef> = {
  checkDmarcGate: DATABASE_ACTIVITY,
  applyDmarcRequest: DATABASE_ACTIVITY,
  // Cloudflare calls inside: minutes for an attempt; its own failures are answered, not thrown.
  publishDmarcRecord: { runsOn: 'default', retry: 'database', timeoutSeconds: LONG_ATTEMPT_SECONDS },
};

export const DMARC_CHECK_INTERVAL_MS = 86_400_000;

/**
 * The DMARC policy ramp (none → quarantine → reject, RFC 7489 §6.3): re-checks the gate daily so
 * the page shows a fresh verdict, and applies the operator's requests as they come. Whether an
 * advance is allowed is the database's decision in applyDmarcRequest, never this body's. The record
 * of the start and of each step applied is published (when the zone is connected) as its own step.
 */
export async function dmarcRampWorkflow(ctx: WorkflowContext<DmarcRampActivities>, input: DmarcRampInput): Promise<DmarcRampResult> {
  const a = ctx.activities;
  const at = () => ctx.activityTime?.() ?? null;
  const run = input.runId ?? null;
  let checks = 0;
  let requests = 0;
  await a.publishDmarcRecord(input.domainId, input.startedBy ?? null);
  for (;;) {
    const gate = await a.checkDmarcGate(input.domainId, at(), run);
    checks++;
    if (gate.state === 'stopped') return { outcome: 'stopped', checks, requests };
    const wakeAt = (await ctx.now()) + input.checkIntervalMs;
    if (gate.requested || (await ctx.waitForSignal(DMARC_REQUEST_SIGNAL, wakeAt))) {
      const applied = await a.applyDmarcRequest(input.domainId, at(), run);
      requests++;
      if (applied.state === 'stopped') return { outcome: 'stopped', checks, requests };
      if (applied.applied === 'advanced' || applied.applied === 'back') await a.publishDmarcRecord(input.domainId, applied.by ?? null);
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
