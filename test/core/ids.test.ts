import assert from 'node:assert/strict';
import { isUuid, uuidv7 } from '../../db/ids';

describe('uuidv7', () => {
  it('is a version 7, RFC 9562 variant UUID carrying its millisecond', () => {
    const at = Date.UTC(2026, 10, 26, 12, 0, 0);
    const id = uuidv7(at);
    assert.equal(isUuid(id), true);
    assert.equal(id[14], '7');
    assert.ok('89ab'.includes(id[19]));
    assert.ok(parseInt(id.replace(/-/g, '').slice(0, 12), 16) >= at);
  });

  it('orders the ids of one process and never repeats their random part, across refills of its random pool', () => {
    // Several thousand ids cross the pool's refills (1,024 ids a refill).
    const ids = Array.from({ length: 5000 }, () => uuidv7());
    const sorted = [...ids].sort();
    assert.deepEqual(sorted, ids);
    const randomParts = new Set(ids.map((id) => id.replace(/-/g, '').slice(16)));
    assert.equal(randomParts.size, ids.length);
  });
});
