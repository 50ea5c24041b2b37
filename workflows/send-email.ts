import type { WorkflowContext, RetryClass } from './context';
import type { SendEmailActivities } from '../activities/send-email-types';

export const SEND_EMAIL_WORKFLOW = 'SendEmail';
/** Signal the API sends after it canceled a queued message, to end the timer early. */
export const CANCEL_SIGNAL = 'cancel';

export interface SendEmailInput {
  emailId: string;
}

export interface SendEmailResult {
  status: string;
}

/** How each activity of this workflow is retried. */
export const sendEmailActivityRetry: Record<keyof SendEmailActivities, RetryClass> = {
  loadForSend: 'infrastructure',
  claimForDelivery: 'infrastructure',
  deliver: 'transport',
  failDelivery: 'infrastructure',
};

/**
 * One message from acceptance to its final state. Workflow id = email id, so starting it twice
 * is a no-op. Who wins between cancel and pick-up is decided by a conditional update in the
 * database (claimForDelivery), never here.
 */
export async function sendEmailWorkflow(
  ctx: WorkflowContext<SendEmailActivities>,
  input: SendEmailInput,
): Promise<SendEmailResult> {
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

  try {
    const delivered = await a.deliver(input.emailId);
    return { status: delivered.status };
  } catch (err) {
    // Transient failures exhausted their attempts, or a permanent failure was raised.
    const failed = await a.failDelivery(input.emailId, describe(err));
    return { status: failed.status };
  }
}

function describe(err: unknown): string {
  if (err && typeof err === 'object' && 'message' in err) return String((err as { message: unknown }).message).slice(0, 1000);
  return String(err).slice(0, 1000);
}
