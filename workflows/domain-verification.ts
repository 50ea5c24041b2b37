import type { WorkflowContext } from './context';
import { defineWorkflow, DATABASE_ACTIVITY, type ActivityDef } from './definition';

// The activity contract: activities/domain-verification.ts implements it.
export interface CheckDomainResult {
  status: 'pending' | 'verified' | 'deleted';
}

export interface DomainVerificationActivities {
  /** Resolves the domain's records, stores what was observed, verifies when all required match. */
  checkDomain(domainId: string): Promise<CheckDomainResult>;
}

export const DOMAIN_VERIFICATION_WORKFLOW = 'DomainVerification';

/** One loop per domain and generation: "verify now" after the window ended starts a new generation. */
export const verificationWorkflowId = (domainId: string, generation: number) => `domain-verification:${domainId}:${generation}`;

export interface DomainVerificationInput {
  domainId: string;
  /** Wait before the second check; doubles each round up to maxDelayMs. */
  firstDelayMs: number;
  maxDelayMs: number;
  /** After this long without success the loop ends; the domain stays pending until "verify now". */
  windowMs: number;
}

export interface DomainVerificationResult {
  status: 'pending' | 'verified' | 'deleted';
  checks: number;
}

export const domainVerificationActivityDefs: Record<keyof DomainVerificationActivities, ActivityDef> = {
  checkDomain: DATABASE_ACTIVITY,
};

/** Checks a new domain's DNS records with backoff until they all match or the window closes. */
export async function domainVerificationWorkflow(
  ctx: WorkflowContext<DomainVerificationActivities>,
  input: DomainVerificationInput,
): Promise<DomainVerificationResult> {
  const deadline = (await ctx.now()) + input.windowMs;
  let delay = input.firstDelayMs;
  for (let checks = 1; ; checks++) {
    const { status } = await ctx.activities.checkDomain(input.domainId);
    if (status !== 'pending') return { status, checks };
    const wakeAt = (await ctx.now()) + delay;
    if (wakeAt > deadline) return { status, checks };
    await ctx.sleepUntil(wakeAt);
    delay = Math.min(delay * 2, input.maxDelayMs);
  }
}

export const domainVerification = defineWorkflow({
  name: DOMAIN_VERIFICATION_WORKFLOW,
  outcome: (r) => r.status,
  body: domainVerificationWorkflow,
  activities: domainVerificationActivityDefs,
  signals: [],
  // Not queued: the loop mostly sleeps, and a queued run would hold its slot meanwhile.
  queue: null,
});
