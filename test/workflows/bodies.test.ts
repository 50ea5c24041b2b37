import assert from 'node:assert/strict';
import {
  sendEmailWorkflow,
  CANCEL_SIGNAL,
  CLOSE_UNCONFIRMED_SIGNAL,
  ADMITTED_SIGNAL,
  ADMISSION_RECHECK_MS,
} from '../../workflows/send-email';
import { domainVerificationWorkflow } from '../../workflows/domain-verification';
import type { WorkflowContext } from '../../workflows/context';
import {
  webhookDeliveryWorkflow,
  WAKE_SIGNAL,
  WEBHOOK_RETRY_DELAYS_MS,
  type WebhookDeliveryActivities,
  type WebhookDeliveryInput,
} from '../../workflows/webhook-delivery';
import { webhookFirstAttemptsWorkflow, type WebhookFirstAttemptsActivities } from '../../workflows/webhook-first-attempts';
import type { SendEmailActivities, ClaimResult, LoadForSendResult } from '../../workflows/send-email';
import { sendBatchWorkflow, type SendBatchActivities, type SendBatchInput, type Unsent } from '../../workflows/send-batch';
import {
  broadcastWorkflow,
  BROADCAST_PAGE_SIZE,
  type BroadcastActivities,
  type FreezeResult,
  type PageResult,
  BROADCAST_CANCEL_SIGNAL,
} from '../../workflows/broadcast';
import {
  automationRunWorkflow,
  AUTOMATION_WAKE_SIGNAL,
  PARK_AFTER_MS,
  parseStepPath,
  type AutomationRunActivities,
  type BeginRunResult,
  type RunStep,
  type StepOutcome,
} from '../../workflows/automation-run';

/** A deterministic in-memory context: virtual clock, scripted signals, recorded activity calls. */
function harness(opts: {
  load: LoadForSendResult;
  claims: ClaimResult[];
  deliver?: () => Promise<{ status: string }>;
  /** When any signal arrives; `signals` says it per name instead. */
  signalAt?: number;
  signals?: Record<string, number>;
  /** What each handBack answers, in turn (default `queued`). */
  handBacks?: string[];
}) {
  let clock = 1_000;
  const calls: string[] = [];
  const waits: { name: string; deadline: number; signaled: boolean }[] = [];
  const activities: SendEmailActivities = {
    loadForSend: async () => (calls.push('loadForSend'), opts.load),
    handBack: async () => (calls.push('handBack'), { status: opts.handBacks?.shift() ?? 'queued' }),
    claimForDelivery: async () => (calls.push('claimForDelivery'), opts.claims.shift() ?? { outcome: 'not_queued', status: 'canceled' }),
    deliver: async () => (calls.push('deliver'), opts.deliver ? opts.deliver() : { status: 'sent' }),
    failDelivery: async (_id, detail) => (calls.push(`failDelivery:${detail}`), { status: 'failed' }),
    closeUnconfirmed: async () => (calls.push('closeUnconfirmed'), { status: 'unconfirmed' }),
  };
  const ctx: WorkflowContext<SendEmailActivities> = {
    now: async () => clock,
    sleepUntil: async (t) => void (clock = Math.max(clock, t)),
    waitForSignal: async (name, deadline) => {
      const at = opts.signals ? opts.signals[name] : opts.signalAt;
      const signaled = at !== undefined && at < deadline;
      clock = signaled ? Math.max(clock, at!) : deadline;
      waits.push({ name, deadline, signaled });
      return signaled;
    },
    activities,
  };
  return { ctx, calls, waits, clock: () => clock };
}

describe('Workflow body: SendEmail', () => {
  it('sends at once when not scheduled', async () => {
    const h = harness({ load: { status: 'queued', scheduledAtMs: null }, claims: [{ outcome: 'claimed' }] });
    assert.deepEqual(await sendEmailWorkflow(h.ctx, { emailId: 'e1' }), { status: 'sent' });
    assert.deepEqual(h.calls, ['loadForSend', 'claimForDelivery', 'deliver']);
    assert.equal(h.waits.length, 0);
  });

  it('waits for scheduled_at on a durable timer that a cancel signal can end', async () => {
    const h = harness({ load: { status: 'queued', scheduledAtMs: 50_000 }, claims: [{ outcome: 'claimed' }] });
    await sendEmailWorkflow(h.ctx, { emailId: 'e1' });
    assert.deepEqual(h.waits, [{ name: CANCEL_SIGNAL, deadline: 50_000, signaled: false }]);
    assert.equal(h.clock(), 50_000);
    assert.deepEqual(h.calls, ['loadForSend', 'claimForDelivery', 'deliver']);
  });

  it('ends without sending when canceled while scheduled', async () => {
    const h = harness({
      load: { status: 'queued', scheduledAtMs: 50_000 },
      claims: [{ outcome: 'not_queued', status: 'canceled' }],
      signalAt: 2_000,
    });
    assert.deepEqual(await sendEmailWorkflow(h.ctx, { emailId: 'e1' }), { status: 'canceled' });
    assert.equal(h.waits[0].signaled, true);
    assert.ok(!h.calls.includes('deliver'));
  });

  it('keeps a sent message open for the confirmation window and closes it as unconfirmed on signal', async () => {
    const h = harness({ load: { status: 'queued', scheduledAtMs: null }, claims: [{ outcome: 'claimed' }], signalAt: 5_000 });
    assert.deepEqual(await sendEmailWorkflow(h.ctx, { emailId: 'e1', confirmationWindowMs: 60_000 }), { status: 'unconfirmed' });
    assert.deepEqual(h.waits, [{ name: CLOSE_UNCONFIRMED_SIGNAL, deadline: 61_000, signaled: true }]);
    assert.deepEqual(h.calls, ['loadForSend', 'claimForDelivery', 'deliver', 'closeUnconfirmed']);
  });

  it('ends at sent when the confirmation window passes without a signal, and never waits without a window', async () => {
    const h = harness({ load: { status: 'queued', scheduledAtMs: null }, claims: [{ outcome: 'claimed' }] });
    assert.deepEqual(await sendEmailWorkflow(h.ctx, { emailId: 'e1', confirmationWindowMs: 60_000 }), { status: 'sent' });
    assert.equal(h.waits.length, 1);
    assert.ok(!h.calls.includes('closeUnconfirmed'));
    const bare = harness({ load: { status: 'queued', scheduledAtMs: null }, claims: [{ outcome: 'claimed' }], signalAt: 5_000 });
    assert.deepEqual(await sendEmailWorkflow(bare.ctx, { emailId: 'e1' }), { status: 'sent' });
    assert.equal(bare.waits.length, 0);
  });

  it('does nothing for a message that is no longer queued', async () => {
    const h = harness({ load: { status: 'canceled', scheduledAtMs: null }, claims: [] });
    assert.deepEqual(await sendEmailWorkflow(h.ctx, { emailId: 'e1' }), { status: 'canceled' });
    assert.deepEqual(h.calls, ['loadForSend']);
  });

  it('stays queued until a deferral ends, then sends (the seam for daily caps)', async () => {
    const h = harness({
      load: { status: 'queued', scheduledAtMs: null },
      claims: [{ outcome: 'deferred', untilMs: 86_400_000 }, { outcome: 'claimed' }],
    });
    await sendEmailWorkflow(h.ctx, { emailId: 'e1' });
    assert.deepEqual(
      h.waits.map((w) => w.deadline),
      [86_400_000],
    );
    assert.deepEqual(h.calls, ['loadForSend', 'claimForDelivery', 'claimForDelivery', 'deliver']);
  });

  it('handed back (Temporal): waits on the timer, hands the message back to the outbox when due, and ends there without a window', async () => {
    const h = harness({ load: { status: 'queued', scheduledAtMs: 50_000 }, claims: [] });
    assert.deepEqual(await sendEmailWorkflow(h.ctx, { emailId: 'e1', handBack: true }), { status: 'queued' });
    assert.deepEqual(h.waits, [{ name: CANCEL_SIGNAL, deadline: 50_000, signaled: false }]);
    assert.deepEqual(h.calls, ['loadForSend', 'handBack'], 'the outbox reserves its caps and starts its delivery');
  });

  it('handed back with a window: delivers once the outbox admits it, after rechecking hourly while a cap holds it', async () => {
    const admittedAt = 50_000 + 2 * ADMISSION_RECHECK_MS + 5_000;
    const h = harness({
      load: { status: 'queued', scheduledAtMs: 50_000 },
      claims: [{ outcome: 'claimed' }],
      signals: { [ADMITTED_SIGNAL]: admittedAt },
    });
    assert.deepEqual(await sendEmailWorkflow(h.ctx, { emailId: 'e1', handBack: true, confirmationWindowMs: 60_000 }), { status: 'sent' });
    assert.deepEqual(
      h.waits.map((w) => [w.name, w.signaled]),
      [
        [CANCEL_SIGNAL, false],
        [ADMITTED_SIGNAL, false],
        [ADMITTED_SIGNAL, false],
        [ADMITTED_SIGNAL, true],
        [CLOSE_UNCONFIRMED_SIGNAL, false],
      ],
    );
    assert.deepEqual(h.calls, ['loadForSend', 'handBack', 'handBack', 'handBack', 'claimForDelivery', 'deliver']);
  });

  it('handed back: a cancel during the timer or while waiting for admission ends it without sending', async () => {
    const early = harness({
      load: { status: 'queued', scheduledAtMs: 50_000 },
      claims: [],
      signals: { [CANCEL_SIGNAL]: 2_000 },
      handBacks: ['canceled'],
    });
    assert.deepEqual(await sendEmailWorkflow(early.ctx, { emailId: 'e1', handBack: true, confirmationWindowMs: 60_000 }), {
      status: 'canceled',
    });
    assert.deepEqual(early.calls, ['loadForSend', 'handBack']);
    const parked = harness({ load: { status: 'queued', scheduledAtMs: 50_000 }, claims: [], handBacks: ['queued', 'canceled'] });
    assert.deepEqual(await sendEmailWorkflow(parked.ctx, { emailId: 'e1', handBack: true, confirmationWindowMs: 60_000 }), {
      status: 'canceled',
    });
    assert.deepEqual(parked.calls, ['loadForSend', 'handBack', 'handBack']);
    assert.ok(!parked.calls.includes('deliver'));
  });

  it('records failure with the reason when delivery gives up', async () => {
    const h = harness({
      load: { status: 'queued', scheduledAtMs: null },
      claims: [{ outcome: 'claimed' }],
      deliver: async () => {
        throw new Error('SMTP 421 error: try later');
      },
    });
    assert.deepEqual(await sendEmailWorkflow(h.ctx, { emailId: 'e1' }), { status: 'failed' });
    assert.equal(h.calls.at(-1), 'failDelivery:SMTP 421 error: try later');
  });
});

describe('Workflow body: SendBatch', () => {
  type Pass = { retry?: Unsent[]; failed?: Unsent[] };
  const later = (id: string, n = 1): Unsent => ({ id, detail: `try later #${n}` });
  const never = (id: string): Unsent => ({ id, detail: 'not a single mailbox' });

  /**
   * A batch as its activities answer it: `owned`, the ids claimBatch answers with (default: all of
   * them; the others were canceled or another run has them); `passes`, what each deliverBatch
   * answers in turn (default: everything handed over). Records every call with its arguments and
   * the virtual time, and the length of every sleep.
   */
  function batch(
    opts: {
      owned?: string[];
      passes?: ((ids: string[], attempt: number) => Pass)[];
      always?: (ids: string[], attempt: number) => Pass;
    } = {},
  ) {
    let clock = 1_000;
    let attempt = 0;
    const calls: string[] = [];
    const sleeps: number[] = [];
    const ctx: WorkflowContext<SendBatchActivities> = {
      now: async () => clock,
      sleepUntil: async (t) => {
        sleeps.push(t - clock);
        clock = Math.max(clock, t);
      },
      waitForSignal: async () => assert.fail('a batch waits for no signal'),
      activities: {
        claimBatch: async (batchId, ids) => {
          calls.push(`claimBatch:${batchId}:${ids.join(',')}@${clock}`);
          return opts.owned ?? ids;
        },
        deliverBatch: async (ids) => {
          calls.push(`deliverBatch:${ids.join(',')}@${clock}`);
          attempt += 1;
          const pass = opts.passes?.[attempt - 1]?.(ids, attempt) ?? opts.always?.(ids, attempt) ?? {};
          return { retry: pass.retry ?? [], failed: pass.failed ?? [] };
        },
        failBatch: async (items) => void calls.push(`failBatch:${items.map((i) => `${i.id}(${i.detail})`).join(',')}@${clock}`),
      },
    };
    const run = (input: Partial<SendBatchInput> = {}) =>
      sendBatchWorkflow(ctx, { batchId: 'batch-1', emailIds: ['a', 'b', 'c'], retryBaseSeconds: 30, ...input });
    return { run, calls, sleeps };
  }

  it("records every message of a pass that failed for good (the engine's retries ran out) as failed, with the reason", async () => {
    const b = batch({
      passes: [
        () => ({ retry: [later('b')] }),
        () => {
          throw new Error('connection terminated');
        },
      ],
    });
    assert.deepEqual(await b.run(), { claimed: 3, failed: 1 });
    assert.deepEqual(b.calls, [
      'claimBatch:batch-1:a,b,c@1000',
      'deliverBatch:a,b,c@1000',
      'deliverBatch:b@31000',
      'failBatch:b(connection terminated)@31000',
    ]);
  });

  it('claims the messages under its own id, then hands them over in one pass', async () => {
    const b = batch();
    assert.deepEqual(await b.run(), { claimed: 3, failed: 0 });
    assert.deepEqual(b.calls, ['claimBatch:batch-1:a,b,c@1000', 'deliverBatch:a,b,c@1000']);
    assert.deepEqual(b.sleeps, []);
  });

  it('delivers only the ids it claimed; claiming none ends the run without a pass', async () => {
    const some = batch({ owned: ['a', 'c'] });
    assert.deepEqual(await some.run(), { claimed: 2, failed: 0 });
    assert.deepEqual(some.calls, ['claimBatch:batch-1:a,b,c@1000', 'deliverBatch:a,c@1000']);

    const none = batch({ owned: [] });
    assert.deepEqual(await none.run(), { claimed: 0, failed: 0 });
    assert.deepEqual(none.calls, ['claimBatch:batch-1:a,b,c@1000']);
    assert.deepEqual(none.sleeps, []);
  });

  it('tries again after the backoff (30 s, then 60 s) with only the ids refused for now', async () => {
    const b = batch({ passes: [() => ({ retry: [later('b'), later('c')] }), () => ({ retry: [later('c', 2)] })] });
    assert.deepEqual(await b.run(), { claimed: 3, failed: 0 });
    assert.deepEqual(b.calls, [
      'claimBatch:batch-1:a,b,c@1000',
      'deliverBatch:a,b,c@1000',
      'deliverBatch:b,c@31000',
      'deliverBatch:c@91000',
    ]);
    assert.deepEqual(b.sleeps, [30_000, 60_000]);

    // The backoff starts from the input's retryBaseSeconds (RETRY_BASE_SECONDS; 1 in the tests' service).
    const short = batch({ passes: [() => ({ retry: [later('a')] }), () => ({ retry: [later('a', 2)] })] });
    await short.run({ retryBaseSeconds: 1 });
    assert.deepEqual(short.sleeps, [1_000, 2_000]);
  });

  it('gives up after the 4th attempt (waits of 30 s, 60 s, 120 s): failBatch with what is still refused, and its last detail', async () => {
    const b = batch({ always: (_ids, n) => ({ retry: [later('b', n)] }) });
    assert.deepEqual(await b.run({ emailIds: ['a', 'b'] }), { claimed: 2, failed: 1 });
    assert.deepEqual(b.calls, [
      'claimBatch:batch-1:a,b@1000',
      'deliverBatch:a,b@1000',
      'deliverBatch:b@31000',
      'deliverBatch:b@91000',
      'deliverBatch:b@211000',
      'failBatch:b(try later #4)@211000',
    ]);
    assert.deepEqual(b.sleeps, [30_000, 60_000, 120_000]);
  });

  it('sends what a pass failed for good to failBatch at once, before the backoff, and retries only the rest', async () => {
    const b = batch({ passes: [() => ({ failed: [never('c')], retry: [later('b')] })] });
    assert.deepEqual(await b.run(), { claimed: 3, failed: 1 });
    assert.deepEqual(b.calls, [
      'claimBatch:batch-1:a,b,c@1000',
      'deliverBatch:a,b,c@1000',
      'failBatch:c(not a single mailbox)@1000',
      'deliverBatch:b@31000',
    ]);
    assert.deepEqual(b.sleeps, [30_000]);

    // Failed for good and nothing to retry: the run ends after failBatch.
    const done = batch({ passes: [() => ({ failed: [never('a'), never('b')] })] });
    assert.deepEqual(await done.run(), { claimed: 3, failed: 2 });
    assert.deepEqual(done.calls, [
      'claimBatch:batch-1:a,b,c@1000',
      'deliverBatch:a,b,c@1000',
      'failBatch:a(not a single mailbox),b(not a single mailbox)@1000',
    ]);
    assert.deepEqual(done.sleeps, []);
  });

  it('counts what it claimed, and as failed both what failed for good and what ran out of attempts (one failBatch on the last pass)', async () => {
    const b = batch({
      owned: ['a', 'b', 'c'],
      passes: [
        () => ({ failed: [never('a')], retry: [later('b'), later('c')] }),
        () => ({ retry: [later('b', 2), later('c', 2)] }),
        () => ({ retry: [later('b', 3), later('c', 3)] }),
        () => ({ failed: [never('c')], retry: [later('b', 4)] }),
      ],
    });
    assert.deepEqual(await b.run({ emailIds: ['a', 'b', 'c', 'd'] }), { claimed: 3, failed: 3 });
    assert.deepEqual(b.calls, [
      'claimBatch:batch-1:a,b,c,d@1000',
      'deliverBatch:a,b,c@1000',
      'failBatch:a(not a single mailbox)@1000',
      'deliverBatch:b,c@31000',
      'deliverBatch:b,c@91000',
      'deliverBatch:b,c@211000',
      // The last pass's permanent failures and its refusals go to failBatch together.
      'failBatch:c(not a single mailbox),b(try later #4)@211000',
    ]);
  });
});

describe('Workflow body: DomainVerification', () => {
  function run(statuses: ('pending' | 'verified' | 'deleted')[], input: { firstDelayMs: number; maxDelayMs: number; windowMs: number }) {
    let clock = 0;
    const sleeps: number[] = [];
    const ctx = {
      now: async () => clock,
      sleepUntil: async (t: number) => {
        sleeps.push(t - clock);
        clock = t;
      },
      waitForSignal: async () => false,
      activities: { checkDomain: async () => ({ status: statuses.shift() ?? 'pending' }) },
    };
    return { result: domainVerificationWorkflow(ctx, { domainId: 'd1', ...input }), sleeps };
  }

  it('re-checks with doubling delays, capped, until verified', async () => {
    const r = run(['pending', 'pending', 'pending', 'pending', 'verified'], {
      firstDelayMs: 60_000,
      maxDelayMs: 200_000,
      windowMs: 3_600_000,
    });
    assert.deepEqual(await r.result, { status: 'verified', checks: 5 });
    assert.deepEqual(r.sleeps, [60_000, 120_000, 200_000, 200_000]);
  });

  it('gives up pending when the next wait would pass the window, and stops for a deleted domain', async () => {
    const r = run([], { firstDelayMs: 60_000, maxDelayMs: 3_600_000, windowMs: 400_000 });
    assert.deepEqual(await r.result, { status: 'pending', checks: 3 });
    assert.deepEqual(r.sleeps, [60_000, 120_000]);
    assert.deepEqual(await run(['deleted'], { firstDelayMs: 1, maxDelayMs: 1, windowMs: 10 }).result, { status: 'deleted', checks: 1 });
  });
});

describe('Workflow body: WebhookDelivery', () => {
  function run(
    outcomes: ('fail' | 'succeeded' | 'stopped' | 'gone')[],
    opts: { wakeAt?: number; input?: Partial<WebhookDeliveryInput>; activityTime?: boolean } = {},
  ) {
    let clock = 0;
    const waits: number[] = [];
    const asked: (number | null)[] = [];
    const stamps: (number | undefined)[] = [];
    const ctx: WorkflowContext<WebhookDeliveryActivities> = {
      now: async () => clock,
      ...(opts.activityTime ? { activityTime: () => clock } : {}),
      sleepUntil: async () => assert.fail('waits must be cancelable by the wake signal'),
      waitForSignal: async (name, deadline) => {
        assert.equal(name, WAKE_SIGNAL);
        const woken = opts.wakeAt !== undefined && opts.wakeAt < deadline && opts.wakeAt >= clock;
        waits.push((woken ? opts.wakeAt! : deadline) - clock);
        clock = woken ? opts.wakeAt! : deadline;
        return woken;
      },
      activities: {
        // The activity decides the outcome and records next_attempt_at = now + retryInMs.
        attemptWebhookDelivery: async ({ retryInMs, atMs }) => {
          asked.push(retryInMs);
          stamps.push(atMs);
          const o = outcomes.shift() ?? 'fail';
          if (o === 'fail') return retryInMs === null ? { outcome: 'failed' } : { outcome: 'retry', nextAttemptAtMs: clock + retryInMs };
          if (o === 'gone') return { outcome: 'failed' };
          return { outcome: o };
        },
      },
    };
    return { result: webhookDeliveryWorkflow(ctx, { deliveryId: 'd1', run: 1, ...opts.input }), waits, asked, stamps };
  }

  it('follows the schedule 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, then fails after the eighth attempt', async () => {
    const r = run([]);
    assert.deepEqual(await r.result, { status: 'failed', attempts: 8 });
    assert.deepEqual(r.waits, [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
    assert.deepEqual(r.asked, [...WEBHOOK_RETRY_DELAYS_MS, null], 'the last attempt knows it is the last');
  });

  it('ends at the first success, at a 410 (failed at once), or when a newer run took the delivery', async () => {
    const ok = run(['fail', 'fail', 'succeeded']);
    assert.deepEqual(await ok.result, { status: 'succeeded', attempts: 3 });
    assert.deepEqual(ok.waits, [5_000, 300_000]);
    assert.deepEqual(await run(['gone']).result, { status: 'failed', attempts: 1 });
    // Woken 1 s into the 5 min wait by a manual retry: the next attempt stops at once.
    const woken = run(['fail', 'fail', 'stopped'], { wakeAt: 6_000 });
    assert.deepEqual(await woken.result, { status: 'stopped', attempts: 3 });
    assert.deepEqual(woken.waits, [5_000, 1_000]);
  });

  it('handed back after a batched first attempt: waits until its next attempt is due, then goes on from the second delay', async () => {
    const r = run(['fail', 'succeeded'], { input: { fromAttempt: 1, nextAttemptAtMs: 4_000 } });
    assert.deepEqual(await r.result, { status: 'succeeded', attempts: 3 });
    assert.deepEqual(r.waits, [4_000, 300_000]);
    assert.deepEqual(r.asked, WEBHOOK_RETRY_DELAYS_MS.slice(1, 3));
  });

  it("gives each attempt the workflow's time where the engine has one (Temporal), and none on the embedded engine", async () => {
    // The activity reckons next_attempt_at and the endpoint's 5 days from it, so both follow the
    // clock the workflow waits on (days ahead of the wall clock under a time-skipping server).
    const stamped = run([], { activityTime: true });
    await stamped.result;
    const attemptsAt = Array.from({ length: WEBHOOK_RETRY_DELAYS_MS.length + 1 }, (_, i) =>
      WEBHOOK_RETRY_DELAYS_MS.slice(0, i).reduce((a, b) => a + b, 0),
    );
    assert.deepEqual(stamped.stamps, attemptsAt);
    const plain = run(['fail', 'succeeded']);
    await plain.result;
    assert.deepEqual(plain.stamps, [undefined, undefined], 'without it the activity reads the database clock');
  });
});

describe('Workflow body: WebhookFirstAttempts', () => {
  it("makes every first attempt in one activity call, with the schedule's first delay for the hand-back", async () => {
    const calls: unknown[] = [];
    const ctx: WorkflowContext<WebhookFirstAttemptsActivities> = {
      now: async () => 0,
      sleepUntil: async () => assert.fail('a batch never waits'),
      waitForSignal: async () => assert.fail('a batch never waits'),
      activities: {
        attemptWebhookBatch: async (req) => {
          calls.push(req);
          return { succeeded: 2, failed: 0, handedBack: 1, skipped: 0 };
        },
      },
    };
    const deliveries = [1, 2, 3].map((i) => ({ deliveryId: `d${i}`, run: 1 }));
    assert.deepEqual(await webhookFirstAttemptsWorkflow(ctx, { deliveries }), { succeeded: 2, failed: 0, handedBack: 1, skipped: 0 });
    assert.deepEqual(calls, [{ deliveries, retryInMs: WEBHOOK_RETRY_DELAYS_MS[0] }]);
    // On Temporal the workflow's time goes with it: the hand-back's next_attempt_at is reckoned from it.
    await webhookFirstAttemptsWorkflow({ ...ctx, activityTime: () => 42 }, { deliveries });
    assert.deepEqual(calls[1], { deliveries, retryInMs: WEBHOOK_RETRY_DELAYS_MS[0], atMs: 42 });
  });
});

describe('Workflow body: BroadcastFanOut', () => {
  /**
   * A broadcast as the activities keep it: its state, its frozen audience and the cursor, and every
   * position accepted (a position accepted twice would be a duplicate message). `stopAt`: the page
   * starting there answers `stopped` (a cancel or failure that landed meanwhile); `crashAfter`:
   * the run dies after that many pages were stored, before the last one's answer was recorded.
   */
  function broadcast(opts: {
    recipients: number;
    state?: FreezeResult['state'];
    stopAt?: { from: number; stopped: 'canceled' | 'failed' };
    crashAfter?: number;
  }) {
    const db: { state: FreezeResult['state'] | 'queued'; recipients: number; cursor: number; accepted: number[] } = {
      state: opts.state ?? 'queued',
      recipients: 0,
      cursor: 0,
      accepted: [],
    };
    let clock = 1_000;
    let stored = 0;
    const calls: string[] = [];
    const sleeps: number[] = [];
    const ctx: WorkflowContext<BroadcastActivities> = {
      now: async () => clock,
      sleepUntil: async (t) => {
        sleeps.push(t);
        clock = Math.max(clock, t);
      },
      // The scheduled wait is a wait for the cancel signal until the time; none arrives here.
      waitForSignal: async (name, deadline) => {
        assert.equal(name, BROADCAST_CANCEL_SIGNAL);
        sleeps.push(deadline);
        clock = Math.max(clock, deadline);
        return false;
      },
      activities: {
        freezeAudience: async (id) => {
          calls.push(`freezeAudience@${clock}`);
          assert.equal(id, 'b1');
          if (db.state === 'queued') {
            db.state = 'sending';
            db.recipients = opts.recipients;
          }
          return { state: db.state, recipients: db.recipients, next: db.cursor };
        },
        enqueuePage: async (id, from, pageSize): Promise<PageResult> => {
          calls.push(`enqueuePage:${from}`);
          assert.equal(id, 'b1');
          assert.equal(pageSize, BROADCAST_PAGE_SIZE);
          if (opts.stopAt?.from === from) {
            db.state = opts.stopAt.stopped;
            return { next: from, done: true, stopped: opts.stopAt.stopped };
          }
          const end = Math.min(from + pageSize, db.recipients);
          for (let p = from; p < end; p++) db.accepted.push(p);
          db.cursor = end;
          if (++stored === opts.crashAfter) throw new Error('crash: the process died before the step was recorded');
          return { next: end, done: end >= db.recipients, stopped: null };
        },
        finishFanOut: async () => void calls.push('finishFanOut'),
      },
    };
    return { ctx, db, calls, sleeps };
  }

  it('freezes the audience at once when not scheduled, then pages through the cursor and finishes', async () => {
    const b = broadcast({ recipients: 2500 });
    assert.deepEqual(await broadcastWorkflow(b.ctx, { broadcastId: 'b1', scheduledAtMs: null }), {
      status: 'sending',
      recipients: 2500,
      pages: 3,
    });
    assert.deepEqual(b.calls, ['freezeAudience@1000', 'enqueuePage:0', 'enqueuePage:1000', 'enqueuePage:2000', 'finishFanOut']);
    assert.deepEqual(b.sleeps, []);
    assert.equal(b.db.accepted.length, 2500);
  });

  it('sleeps until scheduledAtMs only when it is in the future', async () => {
    const ahead = broadcast({ recipients: 10 });
    await broadcastWorkflow(ahead.ctx, { broadcastId: 'b1', scheduledAtMs: 50_000 });
    assert.deepEqual(ahead.sleeps, [50_000]);
    assert.equal(ahead.calls[0], 'freezeAudience@50000', 'the audience is frozen at the scheduled time, not before');

    for (const scheduledAtMs of [500, 1_000]) {
      const due = broadcast({ recipients: 10 });
      await broadcastWorkflow(due.ctx, { broadcastId: 'b1', scheduledAtMs });
      assert.deepEqual(due.sleeps, [], `scheduled at ${scheduledAtMs} with the clock at 1000: no wait`);
      assert.deepEqual(due.calls, ['freezeAudience@1000', 'enqueuePage:0', 'finishFanOut']);
    }
  });

  it('resumes at the frozen cursor after a crash, never accepting an earlier page again', async () => {
    const b = broadcast({ recipients: 2500, crashAfter: 2 });
    await assert.rejects(broadcastWorkflow(b.ctx, { broadcastId: 'b1', scheduledAtMs: null }), /crash/);
    assert.equal(b.db.cursor, 2000, 'the second page was stored and moved the cursor');
    assert.ok(!b.calls.includes('finishFanOut'));
    b.calls.length = 0;

    // Run again (a new run, or the step run again): the freeze answers `sending` and the cursor.
    assert.deepEqual(await broadcastWorkflow(b.ctx, { broadcastId: 'b1', scheduledAtMs: null }), {
      status: 'sending',
      recipients: 2500,
      pages: 1,
    });
    assert.deepEqual(b.calls, ['freezeAudience@1000', 'enqueuePage:2000', 'finishFanOut']);
    assert.equal(new Set(b.db.accepted).size, b.db.accepted.length, 'no position accepted twice');
    assert.equal(b.db.accepted.length, 2500);
  });

  it('stops at a page answering stopped, without finishFanOut', async () => {
    for (const stopped of ['canceled', 'failed'] as const) {
      const b = broadcast({ recipients: 2500, stopAt: { from: 1000, stopped } });
      assert.deepEqual(await broadcastWorkflow(b.ctx, { broadcastId: 'b1', scheduledAtMs: null }), {
        status: stopped,
        recipients: 2500,
        pages: 2,
      });
      assert.deepEqual(b.calls, ['freezeAudience@1000', 'enqueuePage:0', 'enqueuePage:1000']);
      assert.equal(b.db.accepted.length, 1000, 'only the page before the stop was accepted');
    }
  });

  it('ends without a page when the freeze answers canceled, failed or sent', async () => {
    for (const state of ['canceled', 'failed', 'sent'] as const) {
      const b = broadcast({ recipients: 2500, state });
      assert.deepEqual(await broadcastWorkflow(b.ctx, { broadcastId: 'b1', scheduledAtMs: 50_000 }), {
        status: state,
        recipients: 0,
        pages: 0,
      });
      assert.deepEqual(b.calls, ['freezeAudience@50000'], `${state}: no page, no finishFanOut`);
    }
  });
});

describe('Workflow body: AutomationRun', () => {
  const GO: StepOutcome = { go: true };
  const CANCELED: StepOutcome = { go: false, status: 'canceled', reason: 'canceled' };

  /**
   * A run as its activities answer it. Every activity answers `go` unless `on` overrides it; endWait
   * answers `timeout` when the deadline passed and `event` when woken. `wakes`: when wake signals
   * arrive (a wake sent while the run is not waiting is kept, as both engines keep signals, and
   * taken by the next wait at once). Calls are recorded as `activity:path` (with the time or the
   * flag the body passed). `resumeAfter`: a later segment, beginRun answering the delay that parked it.
   */
  function automation(
    steps: RunStep[],
    opts: { status?: BeginRunResult['status']; resumeAfter?: string; wakes?: number[]; on?: Partial<AutomationRunActivities> } = {},
  ) {
    let clock = 1_000;
    const wakes = [...(opts.wakes ?? [])];
    const calls: string[] = [];
    const waits: { deadline: number; woke: boolean; at: number }[] = [];
    const on = opts.on ?? {};
    const ctx: WorkflowContext<AutomationRunActivities> = {
      now: async () => clock,
      sleepUntil: async () => assert.fail('every wait of a run must be cancelable by the wake signal'),
      waitForSignal: async (name, deadline) => {
        assert.equal(name, AUTOMATION_WAKE_SIGNAL);
        const woke = wakes.length > 0 && wakes[0] < deadline;
        clock = woke ? Math.max(clock, wakes.shift()!) : Math.max(clock, deadline);
        waits.push({ deadline, woke, at: clock });
        return woke;
      },
      activities: {
        beginRun: async (runId) => {
          calls.push('beginRun');
          assert.equal(runId, 'r1');
          return { status: opts.status ?? 'running', steps, resumeAfter: opts.resumeAfter ?? null };
        },
        parkRun: async (runId, path, untilMs) => (calls.push(`parkRun:${path}@${untilMs}`), on.parkRun?.(runId, path, untilMs) ?? GO),
        enterDelay: async (runId, path, untilMs) => (
          calls.push(`enterDelay:${path}@${untilMs}`),
          on.enterDelay?.(runId, path, untilMs) ?? GO
        ),
        checkRun: async (runId) => (calls.push(`checkRun@${clock}`), on.checkRun?.(runId) ?? GO),
        finishDelay: async (runId, path) => (calls.push(`finishDelay:${path}@${clock}`), on.finishDelay?.(runId, path) ?? GO),
        sendEmailStep: async (runId, path) => (calls.push(`sendEmailStep:${path}`), on.sendEmailStep?.(runId, path) ?? GO),
        beginWait: async (runId, path, deadlineMs) => (
          calls.push(`beginWait:${path}@${deadlineMs}`),
          on.beginWait?.(runId, path, deadlineMs) ?? GO
        ),
        endWait: async (runId, path, deadlinePassed) => {
          calls.push(`endWait:${path}:${deadlinePassed ? 'deadline' : 'woken'}@${clock}`);
          return on.endWait?.(runId, path, deadlinePassed) ?? { outcome: GO, result: deadlinePassed ? 'timeout' : 'event' };
        },
        conditionStep: async (runId, path) => (
          calls.push(`conditionStep:${path}`),
          on.conditionStep?.(runId, path) ?? { outcome: GO, branch: 'then' }
        ),
        updateContactStep: async (runId, path) => (calls.push(`updateContactStep:${path}`), on.updateContactStep?.(runId, path) ?? GO),
        finishRun: async (_runId, status, reason) => void calls.push(`finishRun:${status}:${reason}`),
      },
    };
    const input = opts.resumeAfter === undefined ? { runId: 'r1' } : { runId: 'r1', segment: 1 };
    return { run: () => automationRunWorkflow(ctx, input), calls, waits, clock: () => clock };
  }

  it("runs every step type in order, each under its path (a branch's steps under the condition's)", async () => {
    const a = automation(
      [
        { type: 'delay', seconds: 30 },
        { type: 'send_email' },
        { type: 'wait_for_event', event: 'activated', timeout_seconds: 3600 },
        { type: 'condition', then: [{ type: 'update_contact' }, { type: 'send_email' }], else: [{ type: 'send_email' }] },
        { type: 'update_contact' },
      ],
      // The event comes 10 min into the wait, which began when the delay ended.
      { wakes: [31_000 + 600_000] },
    );
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 7 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'enterDelay:steps[0]@31000',
      'finishDelay:steps[0]@31000',
      'sendEmailStep:steps[1]',
      'beginWait:steps[2]@3631000',
      'endWait:steps[2]:woken@631000',
      'conditionStep:steps[3]',
      'updateContactStep:steps[3].then[0]',
      'sendEmailStep:steps[3].then[1]',
      'updateContactStep:steps[4]',
      'finishRun:completed:null',
    ]);
    assert.deepEqual(a.waits, [
      { deadline: 31_000, woke: false, at: 31_000 },
      { deadline: 3_631_000, woke: true, at: 631_000 },
    ]);
  });

  it('a wait_for_event nobody resumes ends at its deadline (endWait told the deadline passed), and the run goes on', async () => {
    const a = automation([{ type: 'wait_for_event', event: 'activated', timeout_seconds: 60 }, { type: 'send_email' }]);
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 2 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'beginWait:steps[0]@61000',
      'endWait:steps[0]:deadline@61000',
      'sendEmailStep:steps[1]',
      'finishRun:completed:null',
    ]);
  });

  it('a condition choosing else runs the else branch under its path; no else branch: straight to the next step', async () => {
    const cond: RunStep = { type: 'condition', then: [{ type: 'send_email' }], else: [{ type: 'update_contact' }, { type: 'send_email' }] };
    const a = automation([cond, { type: 'update_contact' }], { on: { conditionStep: async () => ({ outcome: GO, branch: 'else' }) } });
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 4 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'conditionStep:steps[0]',
      'updateContactStep:steps[0].else[0]',
      'sendEmailStep:steps[0].else[1]',
      'updateContactStep:steps[1]',
      'finishRun:completed:null',
    ]);

    const bare = automation([{ type: 'condition', then: [{ type: 'send_email' }] }, { type: 'send_email' }], {
      on: { conditionStep: async () => ({ outcome: GO, branch: 'else' }) },
    });
    assert.deepEqual(await bare.run(), { status: 'completed', reason: null, steps: 2 });
    assert.deepEqual(bare.calls, ['beginRun', 'conditionStep:steps[0]', 'sendEmailStep:steps[1]', 'finishRun:completed:null']);
  });

  it('a send_email answering stop (contact unsubscribed) ends the run completed with the reason, no later step', async () => {
    const a = automation([{ type: 'update_contact' }, { type: 'send_email' }, { type: 'delay', seconds: 60 }, { type: 'send_email' }], {
      on: { sendEmailStep: async () => ({ go: false, status: 'completed', reason: 'contact_unsubscribed' }) },
    });
    assert.deepEqual(await a.run(), { status: 'completed', reason: 'contact_unsubscribed', steps: 2 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'updateContactStep:steps[0]',
      'sendEmailStep:steps[1]',
      'finishRun:completed:contact_unsubscribed',
    ]);
    assert.deepEqual(a.waits, []);
  });

  it('a stop inside a branch ends the whole run, not just the branch; a refused send fails it with the reason', async () => {
    const a = automation([{ type: 'condition', then: [{ type: 'send_email' }, { type: 'update_contact' }] }, { type: 'update_contact' }], {
      on: { sendEmailStep: async (_r, path) => ({ go: false, status: 'failed', reason: `${path}: template_not_found` }) },
    });
    assert.deepEqual(await a.run(), { status: 'failed', reason: 'steps[0].then[0]: template_not_found', steps: 2 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'conditionStep:steps[0]',
      'sendEmailStep:steps[0].then[0]',
      'finishRun:failed:steps[0].then[0]: template_not_found',
    ]);

    // The condition itself can stop the run (the contact was deleted): no branch runs.
    const gone = automation([{ type: 'condition', then: [{ type: 'send_email' }] }], {
      on: { conditionStep: async () => ({ outcome: { go: false, status: 'completed', reason: 'contact_deleted' }, branch: 'else' }) },
    });
    assert.deepEqual(await gone.run(), { status: 'completed', reason: 'contact_deleted', steps: 1 });
    assert.deepEqual(gone.calls, ['beginRun', 'conditionStep:steps[0]', 'finishRun:completed:contact_deleted']);
  });

  it('a spurious wake during wait_for_event (endWait pending) waits again until the same deadline', async () => {
    let ends = 0;
    const a = automation([{ type: 'wait_for_event', event: 'activated', timeout_seconds: 60 }, { type: 'send_email' }], {
      wakes: [5_000],
      on: {
        endWait: async (_r, _p, deadlinePassed) => {
          ends++;
          if (ends === 1) assert.equal(deadlinePassed, false);
          return { outcome: GO, result: ends === 1 ? 'pending' : 'timeout' };
        },
      },
    });
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 2 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'beginWait:steps[0]@61000',
      'endWait:steps[0]:woken@5000',
      'endWait:steps[0]:deadline@61000',
      'sendEmailStep:steps[1]',
      'finishRun:completed:null',
    ]);
    assert.deepEqual(a.waits, [
      { deadline: 61_000, woke: true, at: 5_000 },
      { deadline: 61_000, woke: false, at: 61_000 },
    ]);
  });

  it('a cancel during wait_for_event: endWait answers canceled and the run ends canceled', async () => {
    const a = automation([{ type: 'wait_for_event', event: 'activated', timeout_seconds: 60 }, { type: 'send_email' }], {
      wakes: [5_000],
      on: { endWait: async () => ({ outcome: CANCELED, result: 'pending' }) },
    });
    assert.deepEqual(await a.run(), { status: 'canceled', reason: 'canceled', steps: 1 });
    assert.deepEqual(a.calls, ['beginRun', 'beginWait:steps[0]@61000', 'endWait:steps[0]:woken@5000', 'finishRun:canceled:canceled']);
  });

  it('a cancel during a delay: the wake, checkRun answers canceled, no finishDelay and no later step', async () => {
    const a = automation([{ type: 'delay', seconds: 50 }, { type: 'send_email' }], {
      wakes: [30_000],
      on: { checkRun: async () => CANCELED },
    });
    assert.deepEqual(await a.run(), { status: 'canceled', reason: 'canceled', steps: 1 });
    assert.deepEqual(a.calls, ['beginRun', 'enterDelay:steps[0]@51000', 'checkRun@30000', 'finishRun:canceled:canceled']);
    assert.deepEqual(a.waits, [{ deadline: 51_000, woke: true, at: 30_000 }]);
  });

  it('a wake during a delay that is not a cancel (checkRun go) sleeps on until the same end', async () => {
    const a = automation([{ type: 'delay', seconds: 50 }, { type: 'send_email' }], { wakes: [30_000] });
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 2 });
    assert.deepEqual(a.calls, [
      'beginRun',
      'enterDelay:steps[0]@51000',
      'checkRun@30000',
      'finishDelay:steps[0]@51000',
      'sendEmailStep:steps[1]',
      'finishRun:completed:null',
    ]);
    assert.deepEqual(
      a.waits.map((w) => w.deadline),
      [51_000, 51_000],
    );
  });

  it('a run canceled before its delay began (enterDelay answers canceled) never waits', async () => {
    const a = automation([{ type: 'delay', seconds: 30 }], { on: { enterDelay: async () => CANCELED } });
    assert.deepEqual(await a.run(), { status: 'canceled', reason: 'canceled', steps: 1 });
    assert.deepEqual(a.calls, ['beginRun', 'enterDelay:steps[0]@31000', 'finishRun:canceled:canceled']);
    assert.deepEqual(a.waits, []);
  });

  it('a run that ended before it began (canceled) does nothing, not even finishRun', async () => {
    const a = automation([{ type: 'send_email' }], { status: 'canceled' });
    assert.deepEqual(await a.run(), { status: 'canceled', reason: null, steps: 0 });
    assert.deepEqual(a.calls, ['beginRun']);
  });

  it('a long delay parks the run: parkRun until now + the delay, the segment ends parked, no finishRun, nothing after', async () => {
    const a = automation([{ type: 'send_email' }, { type: 'delay', seconds: 86_400 }, { type: 'send_email' }]);
    assert.deepEqual(await a.run(), { status: 'parked', reason: null, steps: 2 });
    assert.deepEqual(a.calls, ['beginRun', 'sendEmailStep:steps[0]', `parkRun:steps[1]@${1_000 + 86_400_000}`]);
    assert.deepEqual(a.waits, [], 'a parked delay is no timer');

    // Parking inside a branch ends the whole segment too (the step after the condition waits for the next one).
    const inBranch = automation([
      { type: 'condition', then: [{ type: 'delay', seconds: 86_400 }, { type: 'update_contact' }] },
      { type: 'send_email' },
    ]);
    assert.deepEqual(await inBranch.run(), { status: 'parked', reason: null, steps: 2 });
    assert.deepEqual(inBranch.calls, ['beginRun', 'conditionStep:steps[0]', `parkRun:steps[0].then[0]@${1_000 + 86_400_000}`]);
  });

  it('PARK_AFTER_MS is the boundary: a delay just under it is a timer, one of exactly it parks', async () => {
    const s = PARK_AFTER_MS / 1000;
    const short = automation([{ type: 'delay', seconds: s - 1 }]);
    assert.deepEqual(await short.run(), { status: 'completed', reason: null, steps: 1 });
    assert.deepEqual(short.calls, [
      'beginRun',
      `enterDelay:steps[0]@${1_000 + (s - 1) * 1000}`,
      `finishDelay:steps[0]@${1_000 + (s - 1) * 1000}`,
      'finishRun:completed:null',
    ]);
    const exact = automation([{ type: 'delay', seconds: s }]);
    assert.deepEqual(await exact.run(), { status: 'parked', reason: null, steps: 1 });
    assert.deepEqual(exact.calls, ['beginRun', `parkRun:steps[0]@${1_000 + PARK_AFTER_MS}`]);
  });

  it('parkRun answering canceled (canceled meanwhile) ends the run canceled through finishRun, like any stop', async () => {
    const a = automation([{ type: 'delay', seconds: 86_400 }, { type: 'send_email' }], { on: { parkRun: async () => CANCELED } });
    assert.deepEqual(await a.run(), { status: 'canceled', reason: 'canceled', steps: 1 });
    assert.deepEqual(a.calls, ['beginRun', `parkRun:steps[0]@${1_000 + 86_400_000}`, 'finishRun:canceled:canceled']);
    assert.deepEqual(a.waits, []);
  });

  it('a segment resumed after a top-level delay goes on after it (the delay is not run again); a later long delay parks again', async () => {
    const a = automation([{ type: 'delay', seconds: 86_400 }, { type: 'send_email' }], { resumeAfter: 'steps[0]' });
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 1 });
    assert.deepEqual(a.calls, ['beginRun', 'sendEmailStep:steps[1]', 'finishRun:completed:null']);

    const again = automation(
      [{ type: 'delay', seconds: 86_400 }, { type: 'send_email' }, { type: 'delay', seconds: 3_600 }, { type: 'send_email' }],
      { resumeAfter: 'steps[0]' },
    );
    assert.deepEqual(await again.run(), { status: 'parked', reason: null, steps: 2 });
    assert.deepEqual(again.calls, ['beginRun', 'sendEmailStep:steps[1]', `parkRun:steps[2]@${1_000 + 3_600_000}`]);
  });

  it('a segment resumed inside a then branch runs the rest of the branch, then the steps after the condition, without conditionStep', async () => {
    const a = automation(
      [{ type: 'condition', then: [{ type: 'delay', seconds: 86_400 }, { type: 'update_contact' }] }, { type: 'send_email' }],
      { resumeAfter: 'steps[0].then[0]' },
    );
    assert.deepEqual(await a.run(), { status: 'completed', reason: null, steps: 2 });
    assert.deepEqual(a.calls, ['beginRun', 'updateContactStep:steps[0].then[1]', 'sendEmailStep:steps[1]', 'finishRun:completed:null']);
    assert.ok(!a.calls.some((c) => c.startsWith('conditionStep')), 'the condition is not evaluated again');

    // Two levels down, in an else branch: each enclosing list goes on after its condition.
    const deep = automation(
      [
        { type: 'send_email' },
        {
          type: 'condition',
          then: [{ type: 'condition', else: [{ type: 'delay', seconds: 86_400 }, { type: 'send_email' }] }, { type: 'update_contact' }],
        },
        { type: 'update_contact' },
      ],
      { resumeAfter: 'steps[1].then[0].else[0]' },
    );
    assert.deepEqual(await deep.run(), { status: 'completed', reason: null, steps: 3 });
    assert.deepEqual(deep.calls, [
      'beginRun',
      'sendEmailStep:steps[1].then[0].else[1]',
      'updateContactStep:steps[1].then[1]',
      'updateContactStep:steps[2]',
      'finishRun:completed:null',
    ]);

    // A stop in the resumed branch ends the run there, as in a first segment.
    const stopped = automation(
      [{ type: 'condition', then: [{ type: 'delay', seconds: 86_400 }, { type: 'update_contact' }] }, { type: 'send_email' }],
      {
        resumeAfter: 'steps[0].then[0]',
        on: { updateContactStep: async () => ({ go: false, status: 'completed', reason: 'contact_deleted' }) },
      },
    );
    assert.deepEqual(await stopped.run(), { status: 'completed', reason: 'contact_deleted', steps: 1 });
    assert.deepEqual(stopped.calls, ['beginRun', 'updateContactStep:steps[0].then[1]', 'finishRun:completed:contact_deleted']);
  });

  it('parseStepPath reads each level of a step path and refuses anything else', () => {
    assert.deepEqual(parseStepPath('steps[2].then[10].else[0]'), [
      { branch: null, index: 2 },
      { branch: 'then', index: 10 },
      { branch: 'else', index: 0 },
    ]);
    assert.deepEqual(parseStepPath('steps[0]'), [{ branch: null, index: 0 }]);
    for (const bad of ['steps[1].foo[0]', 'x', '', 'steps[1].then[0]x', 'steps[]']) {
      assert.throws(() => parseStepPath(bad), /not a step path/, bad);
    }
  });
});
