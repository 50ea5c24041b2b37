import assert from 'node:assert/strict';
import { SendGate } from '../../activities/send-gate';

describe('SendGate: SMTP transactions in flight, transactional first', () => {
  it('bounds what runs at once, and gives a freed slot to an urgent waiter before bulk ones that waited longer', async () => {
    const gate = new SendGate(2);
    const order: string[] = [];
    let running = 0;
    let most = 0;
    const releases: (() => void)[] = [];
    const job = (name: string) => () =>
      new Promise<void>((resolve) => {
        order.push(name);
        running += 1;
        most = Math.max(most, running);
        releases.push(() => {
          running -= 1;
          resolve();
        });
      });
    const done = [
      gate.run(false, job('bulk-1')),
      gate.run(false, job('bulk-2')),
      gate.run(false, job('bulk-3')),
      gate.run(false, job('bulk-4')),
      gate.run(true, job('receipt')),
    ];
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, ['bulk-1', 'bulk-2'], 'two slots: the rest wait');
    while (releases.length > 0) {
      releases.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(done);
    assert.deepEqual(order, ['bulk-1', 'bulk-2', 'receipt', 'bulk-3', 'bulk-4']);
    assert.equal(most, 2);
  });

  it('frees the slot when the transaction fails', async () => {
    const gate = new SendGate(1);
    await assert.rejects(gate.run(true, async () => Promise.reject(new Error('421'))));
    assert.equal(await gate.run(false, async () => 'next'), 'next');
  });
});
