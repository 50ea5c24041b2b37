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

  /**
   * A check is `true` (matches, served with TTL 1 s), `false` (does not), `gone` (the key is no
   * longer pending), or a number: matches, served with that TTL in seconds.
   */
  function run(
    checks: (boolean | 'gone' | number)[],
    opts: { switched?: boolean; publishFails?: boolean; timing?: Partial<typeof timing> } = {},
  ) {
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
          if (c === 'gone') return { state: 'gone' as const, matches: false };
          if (typeof c === 'number') return { state: 'pending' as const, matches: true, ttlSeconds: c };
          return { state: 'pending' as const, matches: c, ttlSeconds: c ? 1 : null };
        },
        switchDkimKey: async (_k: string, retiringMs: number) => {
          calls.push(`switch ${retiringMs}`);
          return opts.switched === false ? { switched: false, retiringKeyIds: [] } : { switched: true, retiringKeyIds: ['old'] };
        },
        revokeDkimKeys: async (_d: string, ids: string[]) => void calls.push(`revoke ${ids.join(',')}`),
        abandonDkimKey: async () => void calls.push('abandon'),
        publishDkimRecords: async (domainId: string) => {
          calls.push(`publish ${domainId}`);
          if (opts.publishFails) throw new Error('Cloudflare unreachable');
          return { published: true };
        },
      },
    };
    const input = { domainId: 'd1', keyId: 'k1', ...timing, ...opts.timing };
    return { result: dkimRotationWorkflow(ctx, input), calls, waits };
  }

  it('switches only after 3 consecutive matches spanning the minimum spread, then retires and revokes', async () => {
    // Three matches at 0, 1, 2 min span 2 min: short of 5 min, so it keeps checking until 5 min.
    const r = run([false, true, true, false, true, true, true, true, true, true, true]);
    assert.deepEqual(await r.result, { outcome: 'revoked', checks: 10 });
    // A miss restarts the count: the matches counted run from minute 4 to minute 9.
    assert.deepEqual(r.calls.slice(-5), [
      `switch ${timing.retiringMs}`,
      'publish d1',
      `sleep ${timing.retiringMs}`,
      'revoke old',
      'publish d1',
    ]);
    assert.equal(r.calls[0], 'publish d1', 'the pending key is published before the first check');
    assert.ok(r.waits.every((w) => w === 60_000));
  });

  it("waits for the record's TTL when it is longer than the minimum spread, a day at most", async () => {
    // Served with a TTL of 600 s: matches at 0..10 min, the switch only once they span 10 min.
    const r = run(Array(20).fill(600));
    assert.deepEqual(await r.result, { outcome: 'revoked', checks: 11 });
    // A TTL of 30 days counts as one: checks an hour apart switch after 24 h.
    const long = run(Array(40).fill(30 * 86_400), { timing: { checkIntervalMs: 3_600_000, windowMs: 3 * 86_400_000 } });
    assert.deepEqual(await long.result, { outcome: 'revoked', checks: 25 });
    // A miss restarts the spread, and the TTL counted is that of the matches since.
    const reset = run([3600, false, ...Array(10).fill(true)]);
    assert.deepEqual(await reset.result, { outcome: 'revoked', checks: 8 });
  });

  it('publishing that fails or is not connected never fails the rotation: the checks wait for DNS', async () => {
    const r = run(Array(10).fill(true), { publishFails: true });
    assert.deepEqual(await r.result, { outcome: 'revoked', checks: 6 });
    assert.equal(r.calls.filter((c) => c === 'publish d1').length, 3);
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
    assert.deepEqual(r.calls.slice(-2), ['abandon', 'publish d1'], 'the abandoned key is published revoked');
    assert.ok(!r.calls.some((c) => c.startsWith('switch')));
  });
});
