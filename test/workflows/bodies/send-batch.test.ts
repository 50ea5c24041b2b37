import assert from 'node:assert/strict';
import type { WorkflowContext } from '../../../workflows/context';
import { sendBatchWorkflow, type SendBatchActivities, type SendBatchInput, type Unsent } from '../../../workflows/send-batch';

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
