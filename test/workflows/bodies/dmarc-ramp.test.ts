import assert from 'node:assert/strict';
import { dmarcRampWorkflow, type ApplyDmarcRequestResult, type CheckDmarcGateResult } from '../../../workflows/dmarc-ramp';

describe('Workflow body: DmarcRamp', () => {
  const DAY = 86_400_000;

  /** Each wait: 'timer' (the day passes) or 'signal'; each request's result in order. */
  function run(waits: ('timer' | 'signal')[], applied: ApplyDmarcRequestResult[], gates: Partial<CheckDmarcGateResult>[] = []) {
    let clock = 0;
    const calls: string[] = [];
    const ctx = {
      now: async () => clock,
      sleepUntil: async (t: number) => void (clock = t),
      waitForSignal: async (_name: string, t: number) => {
        const w = waits.shift() ?? 'timer';
        calls.push(`wait ${(t - clock) / DAY}d ${w}`);
        if (w === 'timer') clock = t;
        return w === 'signal';
      },
      activities: {
        checkDmarcGate: async () => {
          calls.push('check');
          return { state: 'running' as const, holds: false, requested: false, ...gates.shift() };
        },
        applyDmarcRequest: async () => {
          const r = applied.shift() ?? { state: 'stopped' as const, applied: 'stopped' as const };
          calls.push(`apply ${r.applied}`);
          return r;
        },
        publishDmarcRecord: async (_d: string, actor: string | null) => {
          calls.push(`publish ${actor}`);
          return { state: 'not_connected' as const };
        },
      },
    };
    return { result: dmarcRampWorkflow(ctx, { domainId: 'd1', checkIntervalMs: DAY, runId: 'r1', startedBy: 'console:a' }), calls };
  }

  it('publishes the record at the start and after each step applied, checks the gate daily and applies each signaled request, ending on stop', async () => {
    const r = run(
      ['timer', 'timer', 'signal', 'signal', 'signal', 'signal'],
      [
        { state: 'running', applied: 'refused', by: 'console:b' },
        { state: 'running', applied: 'advanced', by: 'console:b' },
        { state: 'running', applied: 'back', by: 'console:c' },
        { state: 'stopped', applied: 'stopped' },
      ],
    );
    assert.deepEqual(await r.result, { outcome: 'stopped', checks: 6, requests: 4 });
    assert.deepEqual(r.calls, [
      'publish console:a',
      'check',
      'wait 1d timer',
      'check',
      'wait 1d timer',
      'check',
      'wait 1d signal',
      'apply refused',
      'check',
      'wait 1d signal',
      'apply advanced',
      'publish console:b',
      'check',
      'wait 1d signal',
      'apply back',
      'publish console:c',
      'check',
      'wait 1d signal',
      'apply stopped',
    ]);
  });

  it('ends at once when the ramp is gone, and applies a request waiting in the database without its signal', async () => {
    const gone = run([], [], [{ state: 'stopped' }]);
    assert.deepEqual(await gone.result, { outcome: 'stopped', checks: 1, requests: 0 });
    const lost = run([], [{ state: 'stopped', applied: 'stopped' }], [{ requested: true }]);
    assert.deepEqual(await lost.result, { outcome: 'stopped', checks: 1, requests: 1 });
    assert.deepEqual(lost.calls, ['publish console:a', 'check', 'apply stopped']);
  });
});
