import { HistoryBuilder } from './temporal-history';
import { SEND_EMAIL_WORKFLOW, CANCEL_SIGNAL, CLOSE_UNCONFIRMED_SIGNAL } from '../../workflows/send-email';

export const TASK_QUEUE = 'svc-mail';
export const DELIVERY_TASK_QUEUE = 'svc-mail-delivery';
const HOUR = 3_600_000;

/**
 * One path of SendEmail, written once and run two ways: as a Temporal history replayed through
 * the real worker (test/temporal-replay.test.ts) and as a real message on the embedded engine
 * (test/engine-parity.test.ts). Both must show the same activities in order and the same result.
 */
export interface Scenario {
  name: string;
  /** Activities the workflow calls, in order, on either engine. */
  activities: string[];
  /**
   * Where the embedded engine legitimately takes a shorter path to the same end state, the
   * activities it calls there, and why.
   */
  embedded?: { activities: string[]; why: string };
  /** The workflow's result status (and the message's final status). */
  status: string;
  confirmationWindowMs?: number;
  /**
   * The history as a server records it. `wrong` makes it disagree with the workflow code at one
   * point, so replay must fail with a determinism error.
   */
  history(wrong: boolean): HistoryBuilder;
}

function begin(emailId: string, window?: number): HistoryBuilder {
  const input = {
    emailId,
    transportRetryBaseSeconds: 30,
    deliveryTaskQueue: DELIVERY_TASK_QUEUE,
    ...(window ? { confirmationWindowMs: window } : {}),
  };
  return new HistoryBuilder(SEND_EMAIL_WORKFLOW, TASK_QUEUE, [input]).workflowTask();
}

/** loadForSend answered with `scheduledAtMs`, then a workflow task. */
function load(h: HistoryBuilder, emailId: string, scheduledAtMs: number | null): HistoryBuilder {
  const a = h.scheduleActivity('loadForSend', [emailId]);
  h.advance(5).completeActivity(a, { status: 'queued', scheduledAtMs });
  return h.workflowTask();
}

function claim(h: HistoryBuilder, emailId: string, result: unknown, asType = 'claimForDelivery'): HistoryBuilder {
  const a = h.scheduleActivity(asType, [emailId]);
  h.advance(5).completeActivity(a, result);
  return h.workflowTask();
}

/** deliver on the delivery task queue, answered with `status` (on its `attempt`-th try), then a workflow task. */
function deliver(h: HistoryBuilder, status: string, ms = 200, attempt = 1): HistoryBuilder {
  const d = h.scheduleActivity('deliver', [ID], DELIVERY_TASK_QUEUE);
  h.advance(ms).completeActivity(d, { status }, attempt);
  return h.workflowTask();
}

const ID = '019a0000-0000-7000-8000-000000000001';

export const scenarios: Scenario[] = [
  {
    name: 'immediate send',
    activities: ['loadForSend', 'claimForDelivery', 'deliver'],
    status: 'sent',
    history(wrong) {
      const h = load(begin(ID), ID, null);
      // Wrong: the history shows a wait on a timer, which an unscheduled message never does.
      if (wrong) h.fireTimer(h.startTimer(HOUR));
      claim(h, ID, { outcome: 'claimed' });
      return deliver(h, 'sent').complete({ status: 'sent' });
    },
  },
  {
    name: 'scheduled, then sent when the timer fires',
    activities: ['loadForSend', 'claimForDelivery', 'deliver'],
    status: 'sent',
    history(wrong) {
      const h = begin(ID);
      // Wrong: the message was not scheduled, yet the history shows a timer.
      const at = wrong ? null : h.now + 5 + HOUR;
      load(h, ID, at);
      const t = h.startTimer(HOUR);
      h.advance(HOUR).fireTimer(t).workflowTask();
      claim(h, ID, { outcome: 'claimed' });
      return deliver(h, 'sent').complete({ status: 'sent' });
    },
  },
  {
    name: 'scheduled, then canceled by signal',
    activities: ['loadForSend', 'claimForDelivery'],
    embedded: {
      activities: ['loadForSend'],
      why: 'DBOS holds a scheduled start in its queue until scheduled_at, so the workflow first runs after the cancel and finds the message canceled',
    },
    status: 'canceled',
    history(wrong) {
      const h = begin(ID);
      load(h, ID, h.now + 5 + 24 * HOUR);
      const t = h.startTimer(24 * HOUR);
      h.advance(60_000)
        .signal(CANCEL_SIGNAL, [{ at: h.now }])
        .workflowTask();
      // Wrong: the history lacks the timer's cancellation that the signal causes.
      if (!wrong) h.cancelTimer(t);
      claim(h, ID, { outcome: 'not_queued', status: 'canceled' });
      return h.complete({ status: 'canceled' });
    },
  },
  {
    name: 'transient failure retried, then delivered',
    activities: ['loadForSend', 'claimForDelivery', 'deliver'],
    status: 'sent',
    history(wrong) {
      const h = load(begin(ID), ID, null);
      claim(h, ID, { outcome: 'claimed' });
      // Retries happen on the server: only the final (third) attempt is in the history.
      deliver(h, 'sent', 90_000, 3);
      // Wrong: a second delivery the code never asks for.
      if (wrong) h.scheduleActivity('deliver', [ID], DELIVERY_TASK_QUEUE);
      return h.complete({ status: 'sent' });
    },
  },
  {
    name: 'permanent failure',
    activities: ['loadForSend', 'claimForDelivery', 'deliver', 'failDelivery'],
    status: 'failed',
    history(wrong) {
      const h = load(begin(ID), ID, null);
      claim(h, ID, { outcome: 'claimed' });
      const d = h.scheduleActivity('deliver', [ID], DELIVERY_TASK_QUEUE);
      h.advance(200).failActivity(d, { type: 'PermanentFailure', message: 'relay refused the transaction', nonRetryable: true });
      h.workflowTask();
      // Wrong: the history completes the workflow without recording the failure.
      if (wrong) return h.complete({ status: 'failed' });
      const f = h.scheduleActivity('failDelivery', [ID, 'relay refused the transaction']);
      h.advance(5).completeActivity(f, { status: 'failed' });
      return h.workflowTask().complete({ status: 'failed' });
    },
  },
  {
    name: 'hard bounce (5xx for every recipient)',
    activities: ['loadForSend', 'claimForDelivery', 'deliver'],
    status: 'bounced',
    history(wrong) {
      const h = load(begin(ID), ID, null);
      claim(h, ID, { outcome: 'claimed' });
      deliver(h, 'bounced');
      // Wrong: a retry of a bounce the code never makes.
      if (wrong) h.scheduleActivity('failDelivery', [ID, 'bounced']);
      return h.complete({ status: 'bounced' });
    },
  },
  {
    name: 'sent, then closed as unconfirmed by the operator signal',
    activities: ['loadForSend', 'claimForDelivery', 'deliver', 'closeUnconfirmed'],
    status: 'unconfirmed',
    embedded: {
      activities: ['loadForSend', 'claimForDelivery', 'deliver'],
      why: 'the confirmation window is Temporal-only (a waiting DBOS workflow would hold its queue slot); the operator closes the message with svc email close-unconfirmed',
    },
    confirmationWindowMs: 72 * HOUR,
    history(wrong) {
      const h = load(begin(ID, 72 * HOUR), ID, null);
      claim(h, ID, { outcome: 'claimed' });
      deliver(h, 'sent');
      // Wrong: the workflow ends at `sent` as if there were no confirmation window.
      if (wrong) return h.complete({ status: 'sent' });
      const t = h.startTimer(72 * HOUR);
      h.advance(3 * HOUR)
        .signal(CLOSE_UNCONFIRMED_SIGNAL)
        .workflowTask()
        .cancelTimer(t);
      const c = h.scheduleActivity('closeUnconfirmed', [ID]);
      h.advance(5).completeActivity(c, { status: 'unconfirmed' });
      return h.workflowTask().complete({ status: 'unconfirmed' });
    },
  },
];
