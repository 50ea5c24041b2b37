import assert from 'node:assert/strict';
import { dkimRotationWorkflow, type DkimRotationInput } from '../../../workflows/dkim-rotation';

describe('Workflow body: DkimRotation', () => {
  const timing: Omit<DkimRotationInput, 'domainId' | 'keyId'> = {
    checkIntervalMs: 60_000,
    requiredChecks: 3,
    minSpreadMs: 300_000,
    retiringMs: 7 * 86_400_000,
    windowMs: 3_600_000,
  };

  /** A check is `true` (matches), `false` (does not), or `gone` (the key is no longer pending). */
  function run(checks: (boolean | 'gone')[], opts: { switched?: boolean; signalAt?: number } = {}) {
    let clock = 0;
    const calls: string[] = [];
    const waits: number[] = [];
    const ctx = {
      now: async () => clock,
      sleepUntil: async (t: number) => {
        calls.push(`sleep ${t - clock}`);
        clock = t;
      },
      waitForSignal: async (_name: string, t: number) => {
        waits.push(t - clock);
        clock = t;
        return false;
      },
      activities: {
        checkDkimKey: async () => {
          const c = checks.shift() ?? false;
          calls.push(`check ${c}`);
          return c === 'gone' ? { state: 'gone' as const, matches: false } : { state: 'pending' as const, matches: c };
        },
        switchDkimKey: async (_k: string, retiringMs: number) => {
          calls.push(`switch ${retiringMs}`);
          return opts.switched === false ? { switched: false, retiringKeyIds: [] } : { switched: true, retiringKeyIds: ['old'] };
        },
        revokeDkimKeys: async (_d: string, ids: string[]) => void calls.push(`revoke ${ids.join(',')}`),
        abandonDkimKey: async () => void calls.push('abandon'),
      },
    };
    return { result: dkimRotationWorkflow(ctx, { domainId: 'd1', keyId: 'k1', ...timing }), calls, waits };
  }

  it('switches only after 3 consecutive matches spanning the minimum spread, then retires and revokes', async () => {
    // Three matches at 0, 1, 2 min span 2 min: short of 5 min, so it keeps checking until 5 min.
    const r = run([false, true, true, false, true, true, true, true, true, true, true]);
    assert.deepEqual(await r.result, { outcome: 'revoked', checks: 10 });
    // A miss restarts the count: the matches counted run from minute 4 to minute 9.
    assert.deepEqual(r.calls.slice(-3), [`switch ${timing.retiringMs}`, `sleep ${timing.retiringMs}`, 'revoke old']);
    assert.ok(r.waits.every((w) => w === 60_000));
  });

  it('ends as canceled when the key is no longer pending, or the cancel won the switch in the database', async () => {
    const gone = run([true, 'gone']);
    assert.deepEqual(await gone.result, { outcome: 'canceled', checks: 2 });
    assert.ok(!gone.calls.some((c) => c.startsWith('switch')));
    const lost = run(Array(10).fill(true), { switched: false });
    assert.deepEqual(await lost.result, { outcome: 'canceled', checks: 6 });
    assert.ok(!lost.calls.some((c) => c.startsWith('sleep') || c.startsWith('revoke')));
  });

  it('gives up (the pending key revoked) when the record never matches within the window, never switching', async () => {
    const r = run([]);
    assert.deepEqual(await r.result, { outcome: 'expired', checks: 61 });
    assert.equal(r.calls.at(-1), 'abandon');
    assert.ok(!r.calls.some((c) => c.startsWith('switch')));
  });
});
