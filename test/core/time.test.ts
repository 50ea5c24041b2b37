import assert from 'node:assert/strict';
import { parseTimestamp } from '../../core/time';

describe('Core: timestamps a client may send (ISO 8601, 1970 to 9999)', () => {
  it('reads dates and date-times with Z or an offset; without one, UTC', () => {
    assert.equal(parseTimestamp('2026-11-23')?.toISOString(), '2026-11-23T00:00:00.000Z');
    assert.equal(parseTimestamp('2026-11-23T10:30')?.toISOString(), '2026-11-23T10:30:00.000Z');
    assert.equal(parseTimestamp('2026-11-23T10:30:05.123456Z')?.toISOString(), '2026-11-23T10:30:05.123Z');
    assert.equal(parseTimestamp('2026-11-23T10:30:00+02:00')?.toISOString(), '2026-11-23T08:30:00.000Z');
    assert.equal(parseTimestamp('2026-11-23T00:30:00-01:30')?.toISOString(), '2026-11-23T02:00:00.000Z');
    assert.equal(parseTimestamp('1970-01-01T00:00:00Z')?.getTime(), 0);
    assert.equal(parseTimestamp('9999-12-31T23:59:59.999Z')?.toISOString(), '9999-12-31T23:59:59.999Z');
  });

  it('refuses what PostgreSQL or JavaScript would take differently: extreme years, impossible dates, other formats', () => {
    for (const s of [
      '+275760-09-13',
      '+275760-09-13T00:00:00.000Z',
      '-271821-04-20',
      '0000-01-01',
      '0075-01-01',
      '0099-12-31T00:00:00Z',
      '1969-12-31T23:59:59Z',
      '2026-02-30',
      '2026-13-01',
      '2026-11-23T24:00:00Z',
      '2026-11-23T10:60:00Z',
      '2026-11-23T10:30:00+24:00',
      '2026-11-23 10:30',
      'Nov 23 2026',
      '1732350000',
      '2026-11-23T10:30:00\u0000',
      '',
    ]) {
      assert.equal(parseTimestamp(s), null, JSON.stringify(s));
    }
  });

  it('can require an offset (scheduled_at)', () => {
    assert.equal(parseTimestamp('2026-11-23T10:30:00', { requireOffset: true }), null);
    assert.equal(parseTimestamp('2026-11-23', { requireOffset: true }), null);
    assert.ok(parseTimestamp('2026-11-23T10:30:00Z', { requireOffset: true }));
  });
});
