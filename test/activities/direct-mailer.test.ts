import assert from 'node:assert/strict';
import type { DirectOptions } from '../../activities/delivery/direct-mailer';
import { DirectRig } from '../support/direct-rig';
import { directMessage, type MxPeer } from '../support/mx-peer';

/**
 * Direct delivery's routing and outcomes (issue 40; RFC 5321 §5.1, RFC 7505): real DNS on
 * loopback, real SMTP peers on 127.0.41.x, the mailer as the delivery pass uses it.
 */
describe('Direct mailer: routes and outcomes', () => {
  const rig = new DirectRig();
  const { dns } = rig;
  before(() => rig.start());
  after(() => rig.stop());
  afterEach(() => rig.reset());
  const peer = (address: string, script: MxPeer['script'] = {}) => rig.peer(address, script);
  const direct = (o: Partial<DirectOptions> = {}) => rig.direct(o);

  /** `domain` with MX hosts mx1…mxN (preferences 10, 20, …) at these addresses. */
  function publish(domain: string, addresses: string[]): void {
    dns.mx.set(
      domain,
      addresses.map((_, i) => ({ exchange: `mx${i + 1}.${domain}`, priority: (i + 1) * 10 })),
    );
    addresses.forEach((a, i) => dns.a.set(`mx${i + 1}.${domain}`, [a]));
  }

  it('delivers to the most preferred MX only, as the final destination, keeping the envelope sender', async () => {
    const [first, second] = [await peer('127.0.41.1'), await peer('127.0.41.2')];
    publish('pref.test', ['127.0.41.1', '127.0.41.2']);
    const m = direct();
    assert.equal(m.finalDestination, true);
    assert.equal(m.defers, true);
    const out = await m.send(directMessage(['Ann@Pref.test'], 'bounce+ann@sender.test'));
    assert.deepEqual(out, { accepted: ['ann@pref.test'], rejected: [] });
    assert.equal(first.received.length, 1);
    assert.equal(first.received[0].from, 'bounce+ann@sender.test');
    assert.equal(second.connections, 0);
  });

  it('falls back to the next MX on a 451 and on a refused connection', async () => {
    const busy = await peer('127.0.41.1', { rcpt: () => ({ code: 451, text: '4.3.0 try later' }) });
    const last = await peer('127.0.41.3');
    // 127.0.41.2 has no listener: connection refused.
    publish('fallback.test', ['127.0.41.1', '127.0.41.2', '127.0.41.3']);
    const out = await direct().send(directMessage(['bo@fallback.test']));
    assert.deepEqual(out, { accepted: ['bo@fallback.test'], rejected: [] });
    assert.equal(busy.received.length, 0);
    assert.equal(busy.connections, 1);
    assert.deepEqual(last.received[0].to, ['bo@fallback.test']);
  });

  it('answers the last reply when every MX refuses for now, and no reply code when none could be reached', async () => {
    await peer('127.0.41.1', { rcpt: () => ({ code: 451, text: '4.3.0 try later' }) });
    publish('busy.test', ['127.0.41.1']);
    const busy = await direct().send(directMessage(['cy@busy.test']));
    assert.deepEqual(busy.accepted, []);
    assert.equal(busy.rejected[0].code, 451);
    assert.match(busy.rejected[0].response, /4\.3\.0 try later/);
    publish('down.test', ['127.0.41.9']);
    const down = await rig.mailer!.send(directMessage(['cy@down.test']));
    assert.equal(down.rejected[0].code, null);
    assert.equal(down.rejected[0].address, 'cy@down.test');
  });

  it('uses the domain itself when it has no MX records (implicit MX)', async () => {
    const p = await peer('127.0.41.4');
    dns.a.set('plain-a.test', ['127.0.41.4']);
    const out = await direct().send(directMessage(['di@plain-a.test']));
    assert.deepEqual(out.accepted, ['di@plain-a.test']);
    assert.equal(p.received.length, 1);
  });

  it('bounces a null MX (556), a domain that does not exist (550), and defers a failing resolver', async () => {
    dns.mx.set('null-mx.test', [{ exchange: '', priority: 0 }]);
    dns.a.set('null-mx.test', ['127.0.41.1']);
    const p = await peer('127.0.41.1');
    dns.nxdomain.add('gone.test');
    dns.servfail.add('broken-dns.test');
    const out = await direct().send(directMessage(['a@null-mx.test', 'b@gone.test', 'c@broken-dns.test']));
    const by = new Map(out.rejected.map((r) => [r.address, r]));
    assert.equal(by.get('a@null-mx.test')?.code, 556);
    assert.match(by.get('a@null-mx.test')!.response, /5\.1\.10/);
    assert.equal(by.get('b@gone.test')?.code, 550);
    assert.match(by.get('b@gone.test')!.response, /5\.1\.2 domain does not exist/);
    assert.equal(by.get('c@broken-dns.test')?.code, null);
    assert.equal(p.connections, 0);
  });

  it('refuses an MX that resolves only to private addresses unless allowed', async () => {
    const p = await peer('127.0.41.5');
    publish('inside.test', ['127.0.41.5']);
    const refused = await direct({ allowPrivateMx: false }).send(directMessage(['ed@inside.test']));
    assert.deepEqual(refused.rejected, [{ address: 'ed@inside.test', code: 550, response: '5.4.4 MX resolves only to private addresses' }]);
    assert.equal(p.connections, 0);
    rig.mailer!.close();
    const allowed = await direct({ allowPrivateMx: true }).send(directMessage(['ed@inside.test']));
    assert.deepEqual(allowed.accepted, ['ed@inside.test']);
  });

  it('bounces on a 550 without trying the next MX, and keeps the recipients another RCPT accepted', async () => {
    const first = await peer('127.0.41.1', {
      rcpt: (r) => (r.startsWith('nobody') ? { code: 550, text: '5.1.1 no such user' } : undefined),
    });
    const second = await peer('127.0.41.2');
    publish('bounce.test', ['127.0.41.1', '127.0.41.2']);
    const out = await direct().send(directMessage(['nobody@bounce.test', 'fay@bounce.test']));
    assert.deepEqual(out.accepted, ['fay@bounce.test']);
    assert.equal(out.rejected.length, 1);
    assert.equal(out.rejected[0].address, 'nobody@bounce.test');
    assert.equal(out.rejected[0].code, 550);
    assert.match(out.rejected[0].response, /5\.1\.1 no such user/);
    assert.deepEqual(
      first.received.map((r) => r.to),
      [['fay@bounce.test']],
    );
    assert.equal(second.connections, 0);
  });

  it('bounces a 5xx to DATA', async () => {
    await peer('127.0.41.1', { data: () => ({ code: 554, text: '5.7.1 content refused' }) });
    publish('data.test', ['127.0.41.1']);
    const out = await direct().send(directMessage(['gil@data.test']));
    assert.equal(out.rejected[0].code, 554);
    assert.match(out.rejected[0].response, /5\.7\.1 content refused/);
  });

  it('opens one transaction per recipient domain, each with only its own recipients, and leaves Bcc out of the message', async () => {
    const one = await peer('127.0.41.1');
    const two = await peer('127.0.41.2');
    publish('one.test', ['127.0.41.1']);
    publish('two.test', ['127.0.41.2']);
    const msg = directMessage(['ha@one.test', 'ib@two.test', 'jo@one.test']);
    msg.bcc = [{ name: null, address: 'jo@one.test' }];
    const out = await direct().send(msg);
    assert.deepEqual([...out.accepted].sort(), ['ha@one.test', 'ib@two.test', 'jo@one.test']);
    assert.deepEqual(
      one.received.map((r) => r.to),
      [['ha@one.test', 'jo@one.test']],
    );
    assert.deepEqual(
      two.received.map((r) => r.to),
      [['ib@two.test']],
    );
    assert.doesNotMatch(one.received[0].raw.toString(), /^Bcc:/im);
    assert.match(one.received[0].raw.toString(), /^Subject: Direct/m);
  });

  it('waits for a slow greeting', async () => {
    const p = await peer('127.0.41.6', { greetingDelayMs: 1500 });
    publish('slow.test', ['127.0.41.6']);
    const out = await direct().send(directMessage(['ko@slow.test']));
    assert.deepEqual(out.accepted, ['ko@slow.test']);
    assert.equal(p.received.length, 1);
  });

  it('tries the next MX when one greets with 554', async () => {
    await peer('127.0.41.1', { greeting: { code: 554, text: 'no service here' } });
    const second = await peer('127.0.41.2');
    publish('greet.test', ['127.0.41.1', '127.0.41.2']);
    const out = await direct().send(directMessage(['lu@greet.test']));
    assert.deepEqual(out.accepted, ['lu@greet.test']);
    assert.equal(second.received.length, 1);
  });
});
