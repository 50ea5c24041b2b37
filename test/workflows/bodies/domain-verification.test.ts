import assert from 'node:assert/strict';
import { domainVerificationWorkflow } from '../../../workflows/domain-verification';

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
