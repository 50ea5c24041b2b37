import { describeFailure, type WorkflowContext, type RetryClass } from './context';
import { defineWorkflow } from './definition';

export const SEND_EMAIL_WORKFLOW = 'SendEmail';
/** Signal the API sends after it canceled a queued message, to end the timer early. */
export const CANCEL_SIGNAL = 'cancel';
/**
 * Operator signal (Temporal UI/CLI, or `svc email close-unconfirmed`): the message left the
 * provider but no delivery event will come (an ingest outage), so close it as `unconfirmed`.
 */
export const CLOSE_UNCONFIRMED_SIGNAL = 'close-unconfirmed';
/** Every signal SendEmail listens to; bindings register them before the body runs. */
export const SEND_EMAIL_SIGNALS = [CANCEL_SIGNAL, CLOSE_UNCONFIRMED_SIGNAL];

export interface SendEmailInput {
  emailId: string;
  /**
   * How long a message the relay accepted (`sent`) keeps its workflow open for a delivery event
   * or an operator's close-unconfirmed signal. 0 or absent: the workflow ends at `sent`.
   */
  confirmationWindowMs?: number;
}

export interface SendEmailResult {
  status: string;
}

// The activity contract: activities/send-email.ts implements it; this body sees nothing else.
export interface LoadForSendResult {
  status: string;
  scheduledAtMs: number | null;
}

export type ClaimResult = { outcome: 'claimed' } | { outcome: 'not_queued'; status: string } | { outcome: 'deferred'; untilMs: number };

export interface DeliverResult {
  status: string;
}

export interface SendEmailActivities {
  loadForSend(emailId: string): Promise<LoadForSendResult>;
  /** Conditional update queued → sending; the single point where cancel and pick-up race. */
  claimForDelivery(emailId: string): Promise<ClaimResult>;
  /** Hands the message to the relay (or simulates it in test mode) and records per-recipient events. */
  deliver(emailId: string): Promise<DeliverResult>;
  /** Marks what is left undelivered as failed after retries ran out. */
  failDelivery(emailId: string, detail: string): Promise<DeliverResult>;
  /** Conditional update sent → unconfirmed (operator action); any other status is left as it is. */
  closeUnconfirmed(emailId: string): Promise<DeliverResult>;
}

/** How each activity of this workflow is retried. */
export const sendEmailActivityRetry: Record<keyof SendEmailActivities, RetryClass> = {
  loadForSend: 'infrastructure',
  claimForDelivery: 'infrastructure',
  deliver: 'transport',
  failDelivery: 'infrastructure',
  closeUnconfirmed: 'infrastructure',
};

/**
 * One message from acceptance to its final state. Workflow id = email id, so starting it twice
 * is a no-op. Who wins between cancel and pick-up is decided by a conditional update in the
 * database (claimForDelivery), never here.
 */
export async function sendEmailWorkflow(ctx: WorkflowContext<SendEmailActivities>, input: SendEmailInput): Promise<SendEmailResult> {
  const a = ctx.activities;
  const plan = await a.loadForSend(input.emailId);
  if (plan.status !== 'queued') return { status: plan.status };

  let wakeAt = plan.scheduledAtMs;
  for (;;) {
    if (wakeAt !== null && wakeAt > (await ctx.now())) {
      // A cancel signal ends the wait early; the claim below then sees `canceled`.
      await ctx.waitForSignal(CANCEL_SIGNAL, wakeAt);
    }
    const claim = await a.claimForDelivery(input.emailId);
    if (claim.outcome === 'not_queued') return { status: claim.status };
    if (claim.outcome === 'claimed') break;
    // Deferred (daily caps, warm-up): stays queued and cancelable until the allowance returns.
    wakeAt = claim.untilMs;
  }

  let status: string;
  try {
    status = (await a.deliver(input.emailId)).status;
  } catch (err) {
    // Transient failures exhausted their attempts, or a permanent failure was raised.
    const failed = await a.failDelivery(input.emailId, describeFailure(err));
    return { status: failed.status };
  }

  const window = input.confirmationWindowMs ?? 0;
  if (status === 'sent' && window > 0) {
    // Left the provider; a delivery event (or an operator closing it) may still come.
    if (await ctx.waitForSignal(CLOSE_UNCONFIRMED_SIGNAL, (await ctx.now()) + window)) {
      status = (await a.closeUnconfirmed(input.emailId)).status;
    }
  }
  return { status };
}

export const sendEmail = defineWorkflow({
  name: SEND_EMAIL_WORKFLOW,
  body: sendEmailWorkflow,
  retry: sendEmailActivityRetry,
  signals: SEND_EMAIL_SIGNALS,
  // Live mail; test-mode messages are started on `simulation` instead.
  queue: 'delivery',
});
