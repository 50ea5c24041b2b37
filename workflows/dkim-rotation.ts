import type { WorkflowContext } from './context';
import { defineWorkflow, DATABASE_ACTIVITY, LONG_ATTEMPT_SECONDS, type ActivityDef } from './definition';

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
  /** The TTL (seconds) the matching record was served with; null or absent when not known (a miss, a resolver without TTLs). */
  ttlSeconds?: number | null;
}

export interface PublishDkimRecordsResult {
  /** False when the domain's organization is not internal with a Cloudflare token, or the publish failed (logged). */
  published: boolean;
}

export interface SwitchDkimKeyResult {
  /** False when the key was no longer pending (a cancel won the race in the database). */
  switched: boolean;
  /** The keys this switch moved from active to retiring. */
  retiringKeyIds: string[];
}

export interface DkimRotationActivities {
  /**
   * Resolves the pending key's TXT record (DNS_SERVERS) and compares it with the key; with an
   * Ed25519 key signed alongside (RFC 8463), both records must match, and the TTL is the longer.
   */
  checkDkimKey(keyId: string): Promise<CheckDkimKeyResult>;
  /** Conditional pending → active (its Ed25519 companion too), old active of either algorithm → retiring, in one transaction; audited (system). */
  switchDkimKey(keyId: string, retiringMs: number): Promise<SwitchDkimKeyResult>;
  /** Retiring → revoked with the private key deleted; audited (system). */
  revokeDkimKeys(domainId: string, keyIds: string[]): Promise<void>;
  /** Pending → revoked (its Ed25519 companion too) when the rotation gives up (its window passed); no-op when it is not pending. */
  abandonDkimKey(keyId: string): Promise<void>;
  /**
   * Publishes the domain's DKIM records (the keys of the rotation included) to its Cloudflare zone
   * when its organization is internal with a token attached, audited with no actor; otherwise, or
   * when publishing fails, nothing (the checks then wait for the operator's own publish). Never throws.
   */
  publishDkimRecords(domainId: string): Promise<PublishDkimRecordsResult>;
}

export interface DkimRotationInput {
  domainId: string;
  keyId: string;
  /** Between two DNS checks. */
  checkIntervalMs: number;
  /** How many consecutive matching checks the switch needs (at least 3). */
  requiredChecks: number;
  /**
   * The matching checks must span at least this long, and at least the longest TTL the record was
   * served with (capped at MAX_TTL_SPREAD_MS), so resolvers caching an older answer see the new record.
   */
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
  // Cloudflare calls inside: minutes for an attempt; its own failures are answered, not thrown.
  publishDkimRecords: { runsOn: 'default', retry: 'database', timeoutSeconds: LONG_ATTEMPT_SECONDS },
};

/** A TTL longer than a day is taken as a day: the switch waits for it, not for a misconfigured week. */
export const MAX_TTL_SPREAD_MS = 86_400_000;

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
  // Publishing is a convenience: a failure (even one the activity could not answer) leaves the
  // record for the operator to publish, and the checks wait for DNS either way.
  const publish = () => a.publishDkimRecords(input.domainId).catch(() => ({ published: false }));
  const deadline = (await ctx.now()) + input.windowMs;
  const needed = Math.max(3, input.requiredChecks);
  await publish();
  let streak = 0;
  let firstMatchAt = 0;
  let ttlMs = 0;
  let checks = 0;
  for (;;) {
    const checkedAt = await ctx.now();
    const check = await a.checkDkimKey(input.keyId);
    checks++;
    if (check.state === 'gone') {
      await publish();
      return { outcome: 'canceled', checks };
    }
    // A miss restarts the count: resolvers must agree for the whole spread, not now and then.
    if (check.matches) {
      if (streak === 0) [firstMatchAt, ttlMs] = [checkedAt, 0];
      streak++;
      ttlMs = Math.max(ttlMs, Math.min(Math.max(0, check.ttlSeconds ?? 0) * 1000, MAX_TTL_SPREAD_MS));
    } else streak = 0;
    if (streak >= needed && checkedAt - firstMatchAt >= Math.max(input.minSpreadMs, ttlMs)) break;
    const wakeAt = checkedAt + input.checkIntervalMs;
    if (wakeAt > deadline) {
      await a.abandonDkimKey(input.keyId);
      await publish();
      return { outcome: 'expired', checks };
    }
    // The signal only shortens the wait; the next check reads the revoked key and ends the run.
    await ctx.waitForSignal(DKIM_CANCEL_SIGNAL, wakeAt);
  }
  const switched = await a.switchDkimKey(input.keyId, input.retiringMs);
  if (!switched.switched) {
    await publish();
    return { outcome: 'canceled', checks };
  }
  await publish();
  await ctx.sleepUntil((await ctx.now()) + input.retiringMs);
  await a.revokeDkimKeys(input.domainId, switched.retiringKeyIds);
  await publish();
  return { outcome: 'revoked', checks };
}

export const dkimRotation = defineWorkflow({
  name: DKIM_ROTATION_WORKFLOW,
  body: dkimRotationWorkflow,
  // The pending key revoked if the database agrees (not switched yet, as the console's cancel), and
  // the wait between checks ended: the next check reads it gone. After the switch it goes on.
  onCancel: async (ctx, input) => (await ctx.activities.abandonDkimKey(input.keyId), [DKIM_CANCEL_SIGNAL]),
  activities: dkimRotationActivityDefs,
  signals: [DKIM_CANCEL_SIGNAL],
  // Not queued: the run mostly sleeps (days), and a queued run would hold its slot meanwhile.
  queue: null,
});
