import { describeFailure, type WorkflowContext } from './context';
import { defineWorkflow, DATABASE_ACTIVITY, LONG_ATTEMPT_SECONDS, type ActivityDef } from './definition';

export const SEND_EMAIL_WORKFLOW = 'SendEmail';
/** Signal the API sends after it canceled a queued message, to end the timer early. */
export const CANCEL_SIGNAL = 'cancel';
/**
 * Operator signal (Temporal UI/CLI, or `svc email close-unconfirmed`): the message left the
 * provider but no delivery event will come (an ingest outage), so close it as `unconfirmed`.
 */
export const CLOSE_UNCONFIRMED_SIGNAL = 'close-unconfirmed';
/**
 * The outbox's word to a run that handed its scheduled message back: the message's daily
 * allowances are reserved, go on and deliver it (Engine.start with `signal`, one call).
 */
export const ADMITTED_SIGNAL = 'admitted';
/** Every signal SendEmail listens to; bindings register them before the body runs. */
export const SEND_EMAIL_SIGNALS = [CANCEL_SIGNAL, CLOSE_UNCONFIRMED_SIGNAL, ADMITTED_SIGNAL];
/** How often a handed-back run that has not been admitted asks the database again (a cap can hold it for a day). */
export const ADMISSION_RECHECK_MS = 3_600_000;

export interface SendEmailInput {
  emailId: string;
  /**
   * How long a message the relay accepted (`sent`) keeps its workflow open for a delivery event
   * or an operator's close-unconfirmed signal. 0 or absent: the workflow ends at `sent`.
   */
  confirmationWindowMs?: number;
  /**
   * Started ahead of `scheduled_at` by the outbox (ENGINE=temporal): the run waits on its durable
   * timer, then hands the message back to the outbox, which reserves its daily allowances on the
   * day it goes out; with a confirmation window the run then waits for `admitted` and delivers
   * it, without one a SendBatch run does. Absent: the message was due when the run started.
   */
  handBack?: boolean;
}

export interface SendEmailResult {
  status: string;
}

// The activity contract: activities/send-email.ts implements it; this body sees nothing else.
export interface LoadForSendResult {
  status: string;
  scheduledAtMs: number | null;
}

export type ClaimResult = { outcome: 'claimed' } | { outcome: 'not_queued'; status: string };

export interface DeliverResult {
  status: string;
}

export interface SendEmailActivities {
  loadForSend(emailId: string): Promise<LoadForSendResult>;
  /**
   * A scheduled message whose time came goes back to the outbox (still `queued`), where its daily
   * allowances are reserved; answers its status (a message canceled meanwhile stays canceled).
   */
  handBack(emailId: string): Promise<{ status: string }>;
  /** Conditional update queued → sending; the single point where cancel and pick-up race. */
  claimForDelivery(emailId: string): Promise<ClaimResult>;
  /** Hands the message to the relay (or simulates it in test mode) and records per-recipient events. */
  deliver(emailId: string): Promise<DeliverResult>;
  /** Marks what is left undelivered as failed after retries ran out. */
  failDelivery(emailId: string, detail: string): Promise<DeliverResult>;
  /** Conditional update sent → unconfirmed (operator action); any other status is left as it is. */
  closeUnconfirmed(emailId: string): Promise<DeliverResult>;
  /**
   * An operator canceled the run in the engine's UI: the message is canceled as the API cancels it
   * (only while `queued`, with its `canceled` event and webhook); answers whether it was.
   */
  cancelForOperator(emailId: string): Promise<{ canceled: boolean; status: string | null }>;
}

/** Where each activity of this workflow runs and how it is retried. */
export const sendEmailActivityDefs: Record<keyof SendEmailActivities, ActivityDef> = {
  loadForSend: DATABASE_ACTIVITY,
  handBack: DATABASE_ACTIVITY,
  claimForDelivery: DATABASE_ACTIVITY,
  // One SMTP transaction, beside the relay's connections; what it throws is the relay refusing for
  // now (or never: PermanentFailure), retried on the spec's backoff.
  deliver: { runsOn: 'delivery', retry: 'transport', timeoutSeconds: LONG_ATTEMPT_SECONDS },
  failDelivery: DATABASE_ACTIVITY,
  closeUnconfirmed: DATABASE_ACTIVITY,
  cancelForOperator: DATABASE_ACTIVITY,
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

  if (input.handBack && plan.scheduledAtMs !== null) {
    // The durable timer an operator sees in the Temporal UI; a cancel signal ends it early.
    if (plan.scheduledAtMs > (await ctx.now())) await ctx.waitForSignal(CANCEL_SIGNAL, plan.scheduledAtMs);
    // Due: the outbox decides the daily caps now, on the day it goes out.
    const back = await a.handBack(input.emailId);
    if (back.status !== 'queued') return { status: back.status };
    if (!(input.confirmationWindowMs! > 0)) return { status: 'queued' };
    // This run delivers it once the outbox has reserved its allowances and says so.
    while (!(await ctx.waitForSignal(ADMITTED_SIGNAL, (await ctx.now()) + ADMISSION_RECHECK_MS))) {
      const again = await a.handBack(input.emailId);
      if (again.status !== 'queued') return { status: again.status };
    }
  }

  if (plan.scheduledAtMs !== null && plan.scheduledAtMs > (await ctx.now())) {
    // A cancel signal ends the wait early; the claim below then sees `canceled`.
    await ctx.waitForSignal(CANCEL_SIGNAL, plan.scheduledAtMs);
  }
  const claim = await a.claimForDelivery(input.emailId);
  if (claim.outcome === 'not_queued') return { status: claim.status };

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

/**
 * An operator's cancellation of the run: canceled if the database agrees (still `queued`), and
 * then the timer and the admission wait end as a cancel signal would end them, so the claim reads
 * `canceled`. A message already `sending` or further is not the operator's to stop: the run goes
 * on to its true end.
 */
export async function sendEmailOnCancel(ctx: WorkflowContext<SendEmailActivities>, input: SendEmailInput): Promise<string[]> {
  const { canceled } = await ctx.activities.cancelForOperator(input.emailId);
  return canceled ? [CANCEL_SIGNAL, ADMITTED_SIGNAL] : [];
}

export const sendEmail = defineWorkflow({
  name: SEND_EMAIL_WORKFLOW,
  body: sendEmailWorkflow,
  onCancel: sendEmailOnCancel,
  // A run that handed its message back (its time came, no confirmation window) did not deliver it.
  outcome: (r) => (r.status === 'queued' ? 'handed-back' : r.status),
  activities: sendEmailActivityDefs,
  signals: SEND_EMAIL_SIGNALS,
  // Live mail; test-mode messages are started on `simulation` instead.
  queue: 'delivery',
});
