import assert from 'node:assert/strict';
import {
  sendEmailWorkflow,
  sendEmailOnCancel,
  sendEmail,
  CANCEL_SIGNAL,
  CLOSE_UNCONFIRMED_SIGNAL,
  ADMITTED_SIGNAL,
  ADMISSION_RECHECK_MS,
  type SendEmailActivities,
  type ClaimResult,
  type LoadForSendResult,
} from '../../../workflows/send-email';
import type { WorkflowContext } from '../../../workflows/context';

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
  /** What an operator's cancellation finds in the database (default: canceled). */
  operatorCancel?: { canceled: boolean; status: string | null };
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
    cancelForOperator: async () => (calls.push('cancelForOperator'), opts.operatorCancel ?? { canceled: true, status: 'canceled' }),
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

  it("an operator's cancellation cancels a queued message and ends its timer and admission waits; one the database keeps ends none", async () => {
    const h = harness({ load: { status: 'queued', scheduledAtMs: 50_000 }, claims: [] });
    assert.deepEqual(await sendEmailOnCancel(h.ctx, { emailId: 'e1', handBack: true }), [CANCEL_SIGNAL, ADMITTED_SIGNAL]);
    assert.deepEqual(h.calls, ['cancelForOperator']);
    const kept = harness({
      load: { status: 'queued', scheduledAtMs: null },
      claims: [],
      operatorCancel: { canceled: false, status: 'sending' },
    });
    assert.deepEqual(await sendEmailOnCancel(kept.ctx, { emailId: 'e1' }), []);
    assert.equal(sendEmail.onCancel, sendEmailOnCancel);
  });
});
