import { describeFailure, retryPolicy, type WorkflowContext } from './context';
import { defineWorkflow, DATABASE_ACTIVITY, LONG_ATTEMPT_SECONDS, type ActivityDef } from './definition';

export const SEND_BATCH_WORKFLOW = 'SendBatch';

export interface SendBatchInput {
  /** This run's workflow id: the owner its claim writes on each message. */
  batchId: string;
  /** Messages of one mode and stream the outbox started together, oldest first. */
  emailIds: string[];
  /** First delay before a message the relay refused for now is tried again (the spec's 30 s; shorter in tests). */
  retryBaseSeconds: number;
}

export interface SendBatchResult {
  /** Messages this run claimed (the others were canceled meanwhile, or another run has them). */
  claimed: number;
  /** Of those, how many ended `failed` because every attempt was refused or one could never succeed. */
  failed: number;
}

/** A message a pass did not hand over, and why. */
export interface Unsent {
  id: string;
  detail: string;
}

// The activity contract: activities/send-batch.ts implements it; this body sees nothing else.
export interface SendBatchActivities {
  /** Conditional update queued → sending, owned by this run; returns the ids it owns. */
  claimBatch(batchId: string, emailIds: string[]): Promise<string[]>;
  /**
   * Hands each message to the relay (or simulates it in test mode) and records every recipient's
   * outcome in a few statements for the whole batch. A message the relay refused for now comes
   * back in `retry`; one that can never be sent in `failed`. Database trouble is thrown.
   * `batchId`: a message another run has claimed since (deferred, then released) is left to it.
   */
  deliverBatch(emailIds: string[], batchId?: string): Promise<{ retry: Unsent[]; failed: Unsent[] }>;
  /** Marks what is left undelivered of each message as failed. */
  failBatch(items: Unsent[]): Promise<void>;
}

/** Where each activity of this workflow runs and how it is retried when it throws. */
export const sendBatchActivityDefs: Record<keyof SendBatchActivities, ActivityDef> = {
  claimBatch: DATABASE_ACTIVITY,
  // A delivery pass runs on the delivery task queue, where the SMTP workers are. The relay's
  // refusals come back in its answer and wait out the transport backoff in the body below; what
  // it throws is database or worker trouble, retried quickly like any database work.
  deliverBatch: { runsOn: 'delivery', retry: 'database', timeoutSeconds: LONG_ATTEMPT_SECONDS },
  failBatch: DATABASE_ACTIVITY,
};

/**
 * Up to a chunk of messages from the outbox to their final state, in one run: the engine's
 * bookkeeping (a start, a few checkpoints) is paid per batch, not per message. Same guarantees
 * as SendEmail: the claim in the database decides between cancel and pick-up and between two
 * runs naming one message; each message keeps its Message-ID across attempts; messages the relay
 * refused for now are tried again after the transport backoff (30 s, 60 s, 120 s), alone.
 */
export async function sendBatchWorkflow(ctx: WorkflowContext<SendBatchActivities>, input: SendBatchInput): Promise<SendBatchResult> {
  const a = ctx.activities;
  const claimed = await a.claimBatch(input.batchId, input.emailIds);
  const policy = retryPolicy('transport', input.retryBaseSeconds);
  let failed = 0;
  let due = claimed;
  for (let attempt = 1; due.length > 0; attempt++) {
    let pass: { retry: Unsent[]; failed: Unsent[] };
    try {
      pass = await a.deliverBatch(due, input.batchId);
    } catch (err) {
      // The engine's retries of the pass ran out (the database down for minutes, a worker bug):
      // its messages are recorded failed with the reason rather than left `sending` for good.
      const detail = describeFailure(err);
      await a.failBatch(due.map((id) => ({ id, detail })));
      failed += due.length;
      break;
    }
    const giveUp = attempt >= policy.maxAttempts ? pass.retry : [];
    const fail = [...pass.failed, ...giveUp];
    if (fail.length > 0) {
      await a.failBatch(fail);
      failed += fail.length;
    }
    if (pass.retry.length === 0 || giveUp.length > 0) break;
    const delayMs = policy.initialIntervalSeconds * 1000 * policy.backoffCoefficient ** (attempt - 1);
    await ctx.sleepUntil((await ctx.now()) + delayMs);
    due = pass.retry.map((u) => u.id);
  }
  return { claimed: claimed.length, failed };
}

export const sendBatch = defineWorkflow({
  name: SEND_BATCH_WORKFLOW,
  body: sendBatchWorkflow,
  activities: sendBatchActivityDefs,
  signals: [],
  // Live mail; test-mode batches are started on `simulation` instead.
  queue: 'delivery',
});
