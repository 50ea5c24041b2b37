import { HistoryBuilder } from './temporal-history';
import { TASK_QUEUE, DELIVERY_TASK_QUEUE } from './send-email-scenarios';
import { SEND_BATCH_WORKFLOW, type SendBatchResult, type Unsent } from '../../workflows/send-batch';

/**
 * One path of SendBatch (workflows/send-batch.ts), written once and run two ways: as a Temporal
 * history replayed through the real worker (test/workflows/temporal-replay.test.ts) and as real
 * messages on the embedded engine (test/workflows/engine-parity.test.ts). Both must show the same
 * activities in order, the same result and the same final status of each message.
 *
 * Replay matches commands by kind and sequence id only (activity types, arguments, task queues
 * and timer durations are not compared), so each `wrong` twin changes the sequence of command
 * kinds: an activity or a timer more or less than the body issues. Arguments, task queues and
 * durations are still written as the body computes them; the replay test checks each fixture's
 * activity types, deliverBatch's task queue and the result against what the scenario declares.
 */
export interface BatchScenario {
  name: string;
  /** Final status of each message of the batch, in the order the outbox started them (oldest first). */
  statuses: string[];
  /** Activities the workflow calls, in order, on either engine. */
  activities: string[];
  result: SendBatchResult;
  /**
   * Where the embedded engine legitimately takes another path to the same end state, the
   * activities it calls there, and why.
   */
  embedded?: { activities: string[]; why: string };
  /** The history as a server records it; `wrong` makes it disagree with the body at one point. */
  history(wrong: boolean): HistoryBuilder;
}

/** The first retry delay the histories' runs carry (the spec's 30 s), and the backoff after it. */
export const RETRY_BASE_SECONDS = 30;
const delayMs = (attempt: number) => RETRY_BASE_SECONDS * 1000 * 2 ** (attempt - 1);

const BATCH = 'send-batch-0123456789abcdef0123456789abcdef';
const A = '019a0000-0000-7000-8000-0000000000e1';
const B = '019a0000-0000-7000-8000-0000000000e2';
const C = '019a0000-0000-7000-8000-0000000000e3';

/** What deliverBatch answers for a message the relay refused for now, and for one that can never be sent. */
const TRY_LATER = (id: string): Unsent => ({ id, detail: '1 recipient(s) temporarily refused: 4.2.0 mailbox busy, try later' });
const NEVER = (id: string): Unsent => ({ id, detail: 'a stored address is not a single mailbox' });

/**
 * The run starts as the Temporal engine starts it: SendBatchInput plus the binding's settings
 * (transportRetryBaseSeconds, stripped by the binding; deliveryTaskQueue, where `transport`
 * activities such as deliverBatch run), then the first workflow task.
 */
function begin(emailIds: string[]): HistoryBuilder {
  const input = {
    batchId: BATCH,
    emailIds,
    retryBaseSeconds: RETRY_BASE_SECONDS,
    transportRetryBaseSeconds: RETRY_BASE_SECONDS,
    deliveryTaskQueue: DELIVERY_TASK_QUEUE,
  };
  return new HistoryBuilder(SEND_BATCH_WORKFLOW, TASK_QUEUE, [input]).workflowTask();
}

/** claimBatch (workflow task queue) answered with the ids this run owns, then a workflow task. */
function claim(h: HistoryBuilder, emailIds: string[], claimed: string[]): HistoryBuilder {
  const a = h.scheduleActivity('claimBatch', [BATCH, emailIds]);
  return h.advance(10).completeActivity(a, claimed).workflowTask();
}

/** deliverBatch on the delivery task queue, answered with what it did not hand over, then a workflow task. */
function deliver(h: HistoryBuilder, emailIds: string[], pass: { retry?: Unsent[]; failed?: Unsent[] } = {}): HistoryBuilder {
  const d = h.scheduleActivity('deliverBatch', [emailIds], DELIVERY_TASK_QUEUE);
  return h
    .advance(300)
    .completeActivity(d, { retry: pass.retry ?? [], failed: pass.failed ?? [] })
    .workflowTask();
}

/** failBatch (workflow task queue) with what a pass gave up on, then a workflow task. */
function fail(h: HistoryBuilder, items: Unsent[]): HistoryBuilder {
  const a = h.scheduleActivity('failBatch', [items]);
  return h.advance(10).completeActivity(a, null).workflowTask();
}

/** The backoff after the `attempt`-th pass: a timer that runs out, then a workflow task. */
function backoff(h: HistoryBuilder, attempt: number): HistoryBuilder {
  const t = h.startTimer(delayMs(attempt));
  return h.advance(delayMs(attempt)).fireTimer(t).workflowTask();
}

export const batchScenarios: BatchScenario[] = [
  {
    name: 'all delivered in one pass',
    statuses: ['sent', 'sent', 'sent'],
    activities: ['claimBatch', 'deliverBatch'],
    result: { claimed: 3, failed: 0 },
    history(wrong) {
      const h = claim(begin([A, B, C]), [A, B, C], [A, B, C]);
      deliver(h, [A, B, C]);
      // Wrong: a second pass the body never makes when nothing is left to retry.
      if (wrong) deliver(h, [A, B, C]);
      return h.complete({ claimed: 3, failed: 0 });
    },
  },
  {
    name: 'a message alone, sent in one pass',
    statuses: ['sent'],
    activities: ['claimBatch', 'deliverBatch'],
    result: { claimed: 1, failed: 0 },
    history(wrong) {
      const h = begin([A]);
      // Wrong: a timer before the claim, as if the run waited for scheduled_at (the outbox holds scheduled mail).
      if (wrong) h.advance(3_600_000).fireTimer(h.startTimer(3_600_000)).workflowTask();
      claim(h, [A], [A]);
      return deliver(h, [A]).complete({ claimed: 1, failed: 0 });
    },
  },
  {
    name: 'hard bounce: the pass settles the message as bounced',
    statuses: ['bounced'],
    activities: ['claimBatch', 'deliverBatch'],
    result: { claimed: 1, failed: 0 },
    history(wrong) {
      const h = claim(begin([A]), [A], [A]);
      // A bounce is an outcome the pass records, not something left to retry or fail.
      deliver(h, [A]);
      // Wrong: a failBatch for the bounce, which the body never calls.
      if (wrong) fail(h, [NEVER(A)]);
      return h.complete({ claimed: 1, failed: 0 });
    },
  },
  {
    name: 'some messages not claimed, the rest delivered',
    statuses: ['sent', 'canceled'],
    activities: ['claimBatch', 'deliverBatch'],
    result: { claimed: 1, failed: 0 },
    history(wrong) {
      // B was canceled after the outbox started the run: the claim leaves it alone.
      const h = claim(begin([A, B]), [A, B], [A]);
      // Wrong: the run ends without delivering what it claimed.
      if (!wrong) deliver(h, [A]);
      return h.complete({ claimed: 1, failed: 0 });
    },
  },
  {
    name: 'nothing claimed: the run ends without a pass',
    statuses: ['canceled'],
    activities: ['claimBatch'],
    result: { claimed: 0, failed: 0 },
    history(wrong) {
      const h = claim(begin([A]), [A], []);
      // Wrong: a pass over nothing, which the body never makes.
      if (wrong) deliver(h, []);
      return h.complete({ claimed: 0, failed: 0 });
    },
  },
  {
    name: 'one message refused for now, retried alone after the backoff, then delivered',
    statuses: ['sent', 'sent'],
    activities: ['claimBatch', 'deliverBatch', 'deliverBatch'],
    result: { claimed: 2, failed: 0 },
    history(wrong) {
      const h = claim(begin([A, B]), [A, B], [A, B]);
      deliver(h, [A, B], { retry: [TRY_LATER(B)] });
      // Wrong: the second pass at once, without the backoff timer.
      if (!wrong) backoff(h, 1);
      deliver(h, [B]);
      return h.complete({ claimed: 2, failed: 0 });
    },
  },
  {
    name: 'a message refused for now twice, then delivered',
    statuses: ['sent'],
    activities: ['claimBatch', 'deliverBatch', 'deliverBatch', 'deliverBatch'],
    result: { claimed: 1, failed: 0 },
    history(wrong) {
      const h = claim(begin([A]), [A], [A]);
      deliver(h, [A], { retry: [TRY_LATER(A)] });
      backoff(h, 1);
      deliver(h, [A], { retry: [TRY_LATER(A)] });
      // Wrong: the run gives up after the second refusal instead of waiting 60 s and trying again.
      if (wrong) return fail(h, [TRY_LATER(A)]).complete({ claimed: 1, failed: 1 });
      backoff(h, 2);
      deliver(h, [A]);
      return h.complete({ claimed: 1, failed: 0 });
    },
  },
  {
    name: 'a pass fails one message for good: failBatch, then the end',
    statuses: ['sent', 'failed'],
    activities: ['claimBatch', 'deliverBatch', 'failBatch'],
    result: { claimed: 2, failed: 1 },
    history(wrong) {
      const h = claim(begin([A, B]), [A, B], [A, B]);
      deliver(h, [A, B], { failed: [NEVER(B)] });
      // Wrong: the run completes without recording the failure.
      if (!wrong) fail(h, [NEVER(B)]);
      return h.complete({ claimed: 2, failed: 1 });
    },
  },
  {
    name: 'retries exhausted: four passes 30 s, 60 s, 120 s apart, then failBatch',
    statuses: ['failed'],
    activities: ['claimBatch', 'deliverBatch', 'deliverBatch', 'deliverBatch', 'deliverBatch', 'failBatch'],
    result: { claimed: 1, failed: 1 },
    history(wrong) {
      const h = claim(begin([A]), [A], [A]);
      for (let attempt = 1; attempt <= 4; attempt++) {
        deliver(h, [A], { retry: [TRY_LATER(A)] });
        if (attempt < 4) backoff(h, attempt);
      }
      // Wrong: a fourth backoff and a fifth pass instead of giving up after the fourth.
      if (wrong) deliver(backoff(h, 4), [A], { retry: [TRY_LATER(A)] });
      return fail(h, [TRY_LATER(A)]).complete({ claimed: 1, failed: 1 });
    },
  },
];

/**
 * Paths only a replay can drive: the embedded engine would need the database down for minutes
 * (the pass's own retries running out) to take them for real.
 */
export const replayOnlyBatchScenarios: BatchScenario[] = [
  {
    name: "a pass that fails for good (the engine's retries ran out): failBatch for every message it held",
    statuses: ['failed', 'failed'],
    activities: ['claimBatch', 'deliverBatch', 'failBatch'],
    result: { claimed: 2, failed: 2 },
    history(wrong) {
      const h = claim(begin([A, B]), [A, B], [A, B]);
      const d = h.scheduleActivity('deliverBatch', [[A, B]], DELIVERY_TASK_QUEUE);
      h.advance(300).failActivity(d, { type: 'Error', message: 'connection terminated', nonRetryable: false }, 4).workflowTask();
      // Wrong: the run ends without recording the failure (the messages would stay `sending`).
      if (!wrong)
        fail(
          h,
          [A, B].map((id) => ({ id, detail: 'connection terminated' })),
        );
      return h.complete({ claimed: 2, failed: 2 });
    },
  },
];
