import assert from 'node:assert/strict';
import { setTransport } from '../../core/delivery/transport';
import { sharedService, newTenant, type Tenant, type TestEnv } from '../support/service';
import { SmtpSink } from '../support/sink';
import { waitFor } from '../support/wait';

/**
 * Direct delivery through the running service (issue 40): an organization or domain set to
 * `direct` hands its live mail to each recipient domain's MX (a real SMTP server on a 127.0.0.x
 * alias, found through the test DNS server), not to the relay; an MX refusing for now leaves the
 * message `queued` and waiting in its row, and it goes out again when due.
 */
describe('API: direct delivery to recipients’ MX', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let t: Tenant;
  const peers: SmtpSink[] = [];

  /** An MX for `domain`: its own peer on `address`, published in the test DNS. */
  async function mx(domain: string, address: string): Promise<SmtpSink> {
    const peer = new SmtpSink();
    await peer.start(env.directPort, address);
    peers.push(peer);
    env.dns.mx.set(domain, [{ exchange: `mx.${domain}`, priority: 10 }]);
    env.dns.a.set(`mx.${domain}`, [address]);
    return peer;
  }

  const send = async (to: string, tenant = t) => {
    const res = await tenant.call('POST', '/api/v1/emails', {
      body: { from: `app@${tenant.domain}`, to, subject: 'Direct', text: 'straight to the MX' },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.id as string;
  };
  const read = async (id: string, tenant = t) => (await tenant.call('GET', `/api/v1/emails/${id}`)).body;
  const until = (id: string, pred: (e: any) => boolean, what: string, tenant = t) =>
    waitFor(async () => {
      const e = await read(id, tenant);
      return pred(e) ? e : undefined;
    }, what);

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
    await setTransport(env.service.db.orm, { organizationId: t.orgId, transport: 'direct' });
  });
  after(async () => {
    for (const p of peers) await p.stop();
  });

  it('delivers to the recipient domain’s MX, not the relay: sent then delivered', async () => {
    const peer = await mx('direct-ok.test', '127.0.0.51');
    const id = await send('someone@direct-ok.test');
    const e = await until(id, (x) => x.last_event === 'delivered', 'delivered');
    assert.deepEqual(
      e.events.map((x: { type: string }) => x.type),
      ['queued', 'sent', 'delivered'],
    );
    const got = peer.byMessageId(`<${id}@${t.domain}>`);
    assert.equal(got.length, 1);
    assert.deepEqual(got[0].envelopeTo, ['someone@direct-ok.test']);
    // The test tenant's domain has no return-path host: its own address is the envelope sender.
    assert.equal(got[0].envelopeFrom, `app@${t.domain}`);
    assert.equal(got[0].parsed.subject, 'Direct');
    assert.equal(env.sink.byMessageId(`<${id}@${t.domain}>`).length, 0, 'the relay never saw it');
  });

  it('an MX refusing for now defers the message: delivery_delayed with the reply, queued and waiting; due again, delivered once', async () => {
    const peer = await mx('direct-later.test', '127.0.0.52');
    peer.rules.set('busy@direct-later.test', { rcpt: 'tempfail', times: 1 });
    const before = Date.now();
    const id = await send('busy@direct-later.test');
    const waiting = await until(id, (x) => x.waiting?.reason === 'deferred', 'deferred').catch(async (e) => {
      throw new Error(`${e.message}: ${JSON.stringify(await read(id))}`);
    });
    assert.equal(waiting.last_event, 'queued');
    assert.match(waiting.waiting.reply, /451/);
    // The first deferral waits 5 minutes.
    const untilMs = Date.parse(waiting.waiting.until);
    assert.ok(untilMs >= before + 5 * 60_000 && untilMs <= Date.now() + 5 * 60_000 + 1000, waiting.waiting.until);
    const delayed = waiting.events.filter((x: { type: string }) => x.type === 'delivery_delayed');
    assert.equal(delayed.length, 1);
    assert.equal(peer.received.length, 0);

    // Its time comes (moved, not waited for): the outbox takes it again, in a new run.
    await env.service.db.orm.em
      .fork()
      .getConnection()
      .execute(`update emails set retry_at = now() - interval '1 second' where id = ?`, [id]);
    const done = await until(id, (x) => x.last_event === 'delivered', 'delivered after the retry');
    assert.equal(done.waiting, null);
    assert.deepEqual(
      done.events.map((x: { type: string }) => x.type),
      ['queued', 'delivery_delayed', 'sent', 'delivered'],
    );
    assert.equal(peer.byMessageId(`<${id}@${t.domain}>`).length, 1, 'delivered once');
  });

  it('an MX refusing for good bounces the recipient and suppresses the address', async () => {
    const peer = await mx('direct-gone.test', '127.0.0.53');
    peer.rules.set('nobody@direct-gone.test', { rcpt: 'reject', code: 550, message: '5.1.1 no such user' });
    const id = await send('nobody@direct-gone.test');
    const e = await until(id, (x) => x.last_event === 'bounced', 'bounced');
    const bounce = e.events.find((x: { type: string }) => x.type === 'bounced');
    assert.match(bounce.detail ?? bounce.reason ?? JSON.stringify(bounce), /no such user/);
    const listed = await t.call('GET', `/api/v1/suppressions?email=${encodeURIComponent('nobody@direct-gone.test')}`, { as: 'admin' });
    assert.equal(listed.status, 200);
    assert.ok(JSON.stringify(listed.body).includes('nobody@direct-gone.test'), 'suppressed');
  });

  it('a domain set to relay overrides its organization’s direct; test mode never leaves the machine', async () => {
    const peer = await mx('direct-over.test', '127.0.0.54');
    await setTransport(env.service.db.orm, { organizationId: t.orgId, domainId: t.domainId, transport: 'relay' });
    try {
      const id = await send('someone@direct-over.test');
      await until(id, (x) => x.last_event === 'sent', 'sent through the relay');
      assert.equal(env.sink.byMessageId(`<${id}@${t.domain}>`).length, 1, 'the relay took it');
      const testId = (
        await t.call('POST', '/api/v1/emails', {
          as: 'test',
          body: { from: `app@${t.domain}`, to: 'someone@direct-over.test', subject: 'Test mode', text: 'simulated' },
        })
      ).body.id;
      await until(testId, (x) => x.last_event === 'delivered', 'simulated');
      assert.equal(peer.received.length, 0, 'neither reached the MX');
    } finally {
      await setTransport(env.service.db.orm, { organizationId: t.orgId, domainId: t.domainId, transport: 'inherit' });
    }
  });

  it('transport changes are audit-logged', async () => {
    const log = await t.call('GET', '/api/v1/audit-log?action=organization.transport_set', { as: 'admin' });
    assert.equal(log.status, 200);
    const entry = log.body.data.find((x: { target_id?: string; target?: { id: string } }) => JSON.stringify(x).includes(t.orgId));
    assert.ok(entry, JSON.stringify(log.body));
    assert.deepEqual(entry.details, { from: 'relay', to: 'direct' });
    const domainLog = await t.call('GET', '/api/v1/audit-log?action=domain.transport_set', { as: 'admin' });
    assert.equal(domainLog.body.data.length, 2, 'relay, then inherit');
  });
});
