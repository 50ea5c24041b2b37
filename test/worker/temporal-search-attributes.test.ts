import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { MAX_LIST_BYTES, searchAttributePairs } from '../../worker/temporal-search-attributes';

describe('Temporal search attributes: what a start sets', () => {
  const valueOf = (pairs: ReturnType<typeof searchAttributePairs>, name: string) => pairs.find((p) => p.key.name === name)?.value;

  it('sets each label once, and none that is unknown', () => {
    const pairs = searchAttributePairs({ organizations: ['a', 'b', 'a'], mode: 'live', kinds: ['receipt', '', 'receipt'] });
    assert.deepEqual(valueOf(pairs, 'SvcOrganization'), ['a', 'b']);
    assert.equal(valueOf(pairs, 'SvcMode'), 'live');
    assert.equal(valueOf(pairs, 'SvcStream'), undefined);
    assert.deepEqual(valueOf(pairs, 'SvcKind'), ['receipt']);
    assert.deepEqual(searchAttributePairs({}), []);
  });

  it('keeps a list under the server’s 2 KB a value (a batch of 100 organizations), the first ones that fit', () => {
    // Measured against start-dev: a list of 60 ids (2,341 bytes) is refused and the run never starts.
    const orgs = Array.from({ length: 100 }, () => randomUUID());
    const kept = valueOf(searchAttributePairs({ organizations: orgs }), 'SvcOrganization') as string[];
    assert.ok(JSON.stringify(kept).length <= MAX_LIST_BYTES);
    assert.deepEqual(kept, orgs.slice(0, kept.length));
    assert.equal(kept.length, 51);
  });
});
