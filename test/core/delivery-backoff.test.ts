import assert from 'node:assert/strict';
import { DEFER_BASE_MS, DEFER_CAP_MS, deferDelayMs, nextAttempt } from '../../core/delivery/backoff';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

describe('Core: when a deferred message is tried again (issue 40)', () => {
  it('waits 5 minutes after the first deferral, doubling each time, never more than 4 hours', () => {
    const schedule = [0, 1, 2, 3, 4, 5, 6, 7, 50, 5000].map((n) => deferDelayMs(n) / MIN);
    assert.deepEqual(schedule, [5, 10, 20, 40, 80, 160, 240, 240, 240, 240]);
    assert.equal(DEFER_BASE_MS, 5 * MIN);
    assert.equal(DEFER_CAP_MS, 4 * HOUR);
  });

  it('treats a count that is not a sane whole number as the first deferral', () => {
    for (const n of [-1, NaN, Infinity, -Infinity]) assert.equal(deferDelayMs(n), 5 * MIN, String(n));
    assert.equal(deferDelayMs(2.7), 20 * MIN);
  });

  it('schedules the next attempt from now, by the number of earlier deferrals', () => {
    const since = new Date('2026-12-11T10:00:00Z');
    const now = new Date('2026-12-11T12:00:00Z');
    assert.deepEqual(nextAttempt({ deferrals: 0, now, since, maxAgeMs: 4 * DAY }), { retryAt: new Date('2026-12-11T12:05:00Z') });
    assert.deepEqual(nextAttempt({ deferrals: 3, now, since, maxAgeMs: 4 * DAY }), { retryAt: new Date('2026-12-11T12:40:00Z') });
    assert.deepEqual(nextAttempt({ deferrals: 9, now, since, maxAgeMs: 4 * DAY }), { retryAt: new Date('2026-12-11T16:00:00Z') });
  });

  it('does not try before a suspended site reopens, but never earlier than the backoff either', () => {
    const since = new Date('2026-12-11T10:00:00Z');
    const now = new Date('2026-12-11T10:00:00Z');
    const later = new Date('2026-12-11T11:30:00Z');
    assert.deepEqual(nextAttempt({ deferrals: 0, now, since, maxAgeMs: DAY, notBefore: later }), { retryAt: later });
    const sooner = new Date('2026-12-11T10:01:00Z');
    assert.deepEqual(nextAttempt({ deferrals: 0, now, since, maxAgeMs: DAY, notBefore: sooner }), {
      retryAt: new Date('2026-12-11T10:05:00Z'),
    });
  });

  it('gives up when the next attempt would fall past the maximum age, and not a step before', () => {
    const since = new Date('2026-12-11T00:00:00Z');
    const maxAgeMs = HOUR;
    // 55 minutes + 5 minutes lands exactly on the maximum age: still allowed.
    const edge = nextAttempt({ deferrals: 0, now: new Date('2026-12-11T00:55:00Z'), since, maxAgeMs });
    assert.deepEqual(edge, { retryAt: new Date('2026-12-11T01:00:00Z') });
    const past = nextAttempt({ deferrals: 0, now: new Date('2026-12-11T00:55:01Z'), since, maxAgeMs });
    assert.deepEqual(past, { expired: true });
    // A suspension reaching past the maximum age expires the message too.
    const suspended = nextAttempt({ deferrals: 0, now: since, since, maxAgeMs, notBefore: new Date('2026-12-11T01:00:01Z') });
    assert.deepEqual(suspended, { expired: true });
  });

  it('follows the whole schedule to expiry under the 4-day default', () => {
    const since = new Date('2026-12-11T00:00:00Z');
    let now = since;
    let attempts = 0;
    for (;;) {
      const next = nextAttempt({ deferrals: attempts, now, since, maxAgeMs: 4 * DAY });
      if ('expired' in next) break;
      now = next.retryAt;
      attempts++;
    }
    // 5+10+20+40+80+160 minutes = 5h15m, then every 4 hours: 22 more attempts fit in the remaining 90h45m.
    assert.equal(attempts, 6 + 22);
    assert.ok(now.getTime() - since.getTime() <= 4 * DAY);
    assert.ok(now.getTime() + 4 * HOUR - since.getTime() > 4 * DAY);
  });
});
