import type { WorkflowContext } from './context';
import { defineWorkflow, DATABASE_ACTIVITY, type ActivityDef } from './definition';

export const DKIM_ROTATION_WORKFLOW = 'DkimRotation';
/** The console's cancel: the database has revoked the pending key already; this ends the wait early. */
export const DKIM_CANCEL_SIGNAL = 'cancel';

/** One rotation per new key; the console starts it right after the key's row committed. */
export const dkimRotationWorkflowId = (domainId: string, keyId: string) => `dkim-rotation:${domainId}:${keyId}`;

// The activity contract: activities/dkim-rotation.ts implements it.
export interface CheckDkimKeyResult {
  /** pending: still waiting for its record; gone: no longer pending (canceled, or its domain deleted). */
  state: 'pending' | 'gone';
  /** The key's TXT record resolved with this key's `p=`. */
  matches: boolean;
}

export interface SwitchDkimKeyResult {
  /** False when the key was no longer pending (a cancel won the race in the database). */
  switched: boolean;
  /** The keys this switch moved from active to retiring. */
  retiringKeyIds: string[];
}

export interface DkimRotationActivities {
  /** Resolves the pending key's TXT record (DNS_SERVERS) and compares it with the key. */
  checkDkimKey(keyId: string): Promise<CheckDkimKeyResult>;
  /** Conditional pending → active, old active → retiring, in one transaction; audited (system). */
  switchDkimKey(keyId: string, retiringMs: number): Promise<SwitchDkimKeyResult>;
  /** Retiring → revoked with the private key deleted; audited (system). */
  revokeDkimKeys(domainId: string, keyIds: string[]): Promise<void>;
  /** Pending → revoked when the rotation gives up (its window passed); no-op when it is not pending. */
  abandonDkimKey(keyId: string): Promise<void>;
}

export interface DkimRotationInput {
  domainId: string;
  keyId: string;
  /** Between two DNS checks. */
  checkIntervalMs: number;
  /** How many consecutive matching checks the switch needs (at least 3). */
  requiredChecks: number;
  /** The matching checks must span at least this long: the record's TTL, so caches hold the new record. */
  minSpreadMs: number;
  /** After the switch, how long the old key stays published and verifiable: longer than mail may be in flight. */
  retiringMs: number;
  /** Without a switch after this long, the rotation gives up and the pending key is revoked. */
  windowMs: number;
}

export type DkimRotationOutcome = 'revoked' | 'canceled' | 'expired';

export interface DkimRotationResult {
  outcome: DkimRotationOutcome;
  checks: number;
}

export const dkimRotationActivityDefs: Record<keyof DkimRotationActivities, ActivityDef> = {
  checkDkimKey: DATABASE_ACTIVITY,
  switchDkimKey: DATABASE_ACTIVITY,
  revokeDkimKeys: DATABASE_ACTIVITY,
  abandonDkimKey: DATABASE_ACTIVITY,
};

/**
 * One DKIM key rotation (RFC 6376 §3.1 selectors): waits until the new key's record resolves on
 * enough checks spread over its TTL, switches signing to it, keeps the old key published through
 * the retiring period, then revokes it. Who wins between cancel and switch is the database's
 * conditional update (switchDkimKey), never this body.
 */
export async function dkimRotationWorkflow(
  ctx: WorkflowContext<DkimRotationActivities>,
  input: DkimRotationInput,
): Promise<DkimRotationResult> {
  const a = ctx.activities;
  const deadline = (await ctx.now()) + input.windowMs;
  const needed = Math.max(3, input.requiredChecks);
  let streak = 0;
  let firstMatchAt = 0;
  let checks = 0;
  for (;;) {
    const checkedAt = await ctx.now();
    const check = await a.checkDkimKey(input.keyId);
    checks++;
    if (check.state === 'gone') return { outcome: 'canceled', checks };
    // A miss restarts the count: resolvers must agree for the whole spread, not now and then.
    if (check.matches) {
      if (streak === 0) firstMatchAt = checkedAt;
      streak++;
    } else streak = 0;
    if (streak >= needed && checkedAt - firstMatchAt >= input.minSpreadMs) break;
    const wakeAt = checkedAt + input.checkIntervalMs;
    if (wakeAt > deadline) {
      await a.abandonDkimKey(input.keyId);
      return { outcome: 'expired', checks };
    }
    // The signal only shortens the wait; the next check reads the revoked key and ends the run.
    await ctx.waitForSignal(DKIM_CANCEL_SIGNAL, wakeAt);
  }
  const switched = await a.switchDkimKey(input.keyId, input.retiringMs);
  if (!switched.switched) return { outcome: 'canceled', checks };
  await ctx.sleepUntil((await ctx.now()) + input.retiringMs);
  await a.revokeDkimKeys(input.domainId, switched.retiringKeyIds);
  return { outcome: 'revoked', checks };
}

export const dkimRotation = defineWorkflow({
  name: DKIM_ROTATION_WORKFLOW,
  body: dkimRotationWorkflow,
  activities: dkimRotationActivityDefs,
  signals: [DKIM_CANCEL_SIGNAL],
  // Not queued: the run mostly sleeps (days), and a queued run would hold its slot meanwhile.
  queue: null,
});
