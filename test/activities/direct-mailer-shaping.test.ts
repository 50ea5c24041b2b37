import assert from 'node:assert/strict';
import type { DirectOptions } from '../../activities/delivery/direct-mailer';
import { DirectRig } from '../support/direct-rig';
import { ConnectionCounter, directMessage, MxPeer, shapingWith, StepClock } from '../support/mx-peer';

/**
 * Direct delivery's shaping per (source IP, site) (issue 40): the connection cap under a burst,
 * messages per connection, the per-minute rate, suspension after a throttling reply, and the
 * source addresses and EHLO name a receiving MX sees. Peers on 127.0.42.x.
 */
describe('Direct mailer: shaping per site and source address', () => {
  const rig = new DirectRig();
  const { dns } = rig;
  before(() => rig.start());
  after(() => rig.stop());
  afterEach(() => rig.reset());
  const peer = (address: string, script: MxPeer['script'] = {}, counter?: ConnectionCounter) => rig.peer(address, script, 'none', counter);
  const direct = (o: Partial<DirectOptions> = {}) => rig.direct(o);

  it('never opens more connections to a site than its cap, across its MX hosts, under a 2,000-message burst', async () => {
    // One site, two MX hosts of equal preference (so messages alternate between them); both count into one counter.
    const counter = new ConnectionCounter();
    const [a, b] = [await peer('127.0.42.1', {}, counter), await peer('127.0.42.2', {}, counter)];
    dns.mx.set('burst.test', [
      { exchange: 'mx-a.burst.test', priority: 10 },
      { exchange: 'mx-b.burst.test', priority: 10 },
    ]);
    dns.a.set('mx-a.burst.test', ['127.0.42.1']);
    dns.a.set('mx-b.burst.test', ['127.0.42.2']);
    const m = direct({ shaping: shapingWith({ connections: 3, messagesPerConnection: 40, perMinute: 100_000 }) });
    const outs = await Promise.all(Array.from({ length: 2000 }, (_, i) => m.send(directMessage([`r${i}@burst.test`]))));
    assert.equal(outs.flatMap((o) => o.accepted).length, 2000);
    assert.deepEqual(
      outs.flatMap((o) => o.rejected),
      [],
    );
    assert.equal(a.received.length + b.received.length, 2000);
    assert.ok(a.received.length > 0 && b.received.length > 0, 'both MX hosts of the site were used');
    assert.ok(counter.max <= 3, `at most 3 connections at once, saw ${counter.max}`);
    assert.ok(counter.maxPerConnection <= 40, `at most 40 messages per connection, saw ${counter.maxPerConnection}`);
    // Connections are kept between messages: far fewer than one per message.
    assert.ok(counter.total <= 200, `connections reused: ${counter.total} for 2,000 messages`);
  });

  it('suspends a site after a 421 "rate limited" and answers its next sends at once, until the suspension ends', async () => {
    const clock = new StepClock();
    const first = await peer('127.0.42.3', { rcpt: () => ({ code: 421, text: '4.7.28 rate limited, slow down' }) });
    const second = await peer('127.0.42.4');
    dns.mx.set('throttle.test', [
      { exchange: 'mx1.throttle.test', priority: 10 },
      { exchange: 'mx2.throttle.test', priority: 20 },
    ]);
    dns.a.set('mx1.throttle.test', ['127.0.42.3']);
    dns.a.set('mx2.throttle.test', ['127.0.42.4']);
    const m = direct({ clock, shaping: shapingWith({ suspendMinutes: 15 }) });
    const until = new Date(clock.now().getTime() + 15 * 60_000);

    const hit = await m.send(directMessage(['mo@throttle.test']));
    assert.equal(hit.rejected[0].code, null);
    assert.match(hit.rejected[0].response, /^site suspended: 421 4\.7\.28 rate limited/);
    assert.deepEqual(hit.rejected[0].suspendedUntil, until);
    assert.equal(second.connections, 0, 'the rest of the site is suspended too');

    const connections = first.connections;
    const next = await m.send(directMessage(['ny@throttle.test']));
    assert.deepEqual(next.rejected, [
      { address: 'ny@throttle.test', code: null, response: 'site suspended: 421 4.7.28 rate limited, slow down', suspendedUntil: until },
    ]);
    assert.equal(first.connections, connections, 'no connection while suspended');

    first.script = {};
    clock.advance(15 * 60_000 + 1);
    const after = await m.send(directMessage(['ol@throttle.test']));
    assert.deepEqual(after.accepted, ['ol@throttle.test']);
  });

  it('sends from another source address when the site is suspended for one', async () => {
    const p = await peer('127.0.42.5', {
      rcpt: (_r, remote) => (remote === '127.0.42.101' ? { code: 451, text: '4.7.650 temporarily rate limited' } : undefined),
    });
    dns.mx.set('pool.test', [{ exchange: 'mx.pool.test', priority: 10 }]);
    dns.a.set('mx.pool.test', ['127.0.42.5']);
    const m = direct({
      sourceIps: ['127.0.42.101', '127.0.42.102'],
      shaping: shapingWith({ suspendOn: ['temporarily rate limited'] }),
    });
    const out = await m.send(directMessage(['pa@pool.test']));
    assert.deepEqual(out.accepted, ['pa@pool.test']);
    assert.deepEqual(
      p.received.map((r) => r.remoteAddress),
      ['127.0.42.102'],
    );
    // .101 stays suspended: the next sends all leave from .102.
    await m.send(directMessage(['qu@pool.test']));
    await m.send(directMessage(['ra@pool.test']));
    assert.deepEqual(
      p.received.map((r) => r.remoteAddress),
      ['127.0.42.102', '127.0.42.102', '127.0.42.102'],
    );
  });

  it('binds the configured source addresses in turn and introduces itself with the EHLO name', async () => {
    const p = await peer('127.0.42.6');
    dns.mx.set('seen.test', [{ exchange: 'mx.seen.test', priority: 10 }]);
    dns.a.set('mx.seen.test', ['127.0.42.6']);
    const m = direct({ sourceIps: ['127.0.42.111', '127.0.42.112'], heloName: 'out1.mta.sender.test' });
    await m.send(directMessage(['sa@seen.test']));
    await m.send(directMessage(['te@seen.test']));
    assert.deepEqual(p.received.map((r) => r.remoteAddress).sort(), ['127.0.42.111', '127.0.42.112']);
    assert.deepEqual(
      p.received.map((r) => r.ehlo),
      ['out1.mta.sender.test', 'out1.mta.sender.test'],
    );
  });

  it('holds a message that exceeds the per-minute rate until the minute has room', async () => {
    const clock = new StepClock();
    const p = await peer('127.0.42.7');
    dns.mx.set('rate.test', [{ exchange: 'mx.rate.test', priority: 10 }]);
    dns.a.set('mx.rate.test', ['127.0.42.7']);
    const m = direct({ clock, shaping: shapingWith({ perMinute: 2 }) });
    let settled = 0;
    const sends = ['ua', 'vi', 'wu'].map((u) => m.send(directMessage([`${u}@rate.test`])).finally(() => (settled += 1)));
    while (settled < 2) await new Promise((r) => setTimeout(r, 20));
    // The clock has not moved: the third message waits however long real time passes.
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(settled, 2);
    assert.equal(p.received.length, 2);
    clock.advance(60_001);
    const outs = await Promise.all(sends);
    assert.equal(outs.flatMap((o) => o.accepted).length, 3);
    assert.equal(p.received.length, 3);
  });
});
