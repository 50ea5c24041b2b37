import assert from 'node:assert/strict';
import { Client } from 'pg';
import { SmtpSink } from '../support/sink';
import { TestDns } from '../support/dns';
import { crashTestSvc, freePort, runSvc, svcJson, waitHealthy, type Child } from '../support/child';
import { request } from '../support/http';
import { waitFor } from '../support/wait';

/**
 * A message an MX refused for now waits in its row, not in a process: `svc start` killed during
 * the wait and started again delivers it when it is due, once (issue 40). The organization is set
 * to direct delivery with `svc transport set`, as an operator would.
 */
describe('Direct delivery: a process killed while a message waits for its retry', function () {
  this.timeout(180_000);
  let dns: TestDns;
  let mx: SmtpSink;
  let child: Child | undefined;

  before(async () => {
    dns = new TestDns();
    await dns.start();
  });
  after(async () => {
    if (child && child.proc.exitCode === null) child.proc.kill('SIGKILL');
    await mx?.stop();
    await dns.stop();
  });

  it('loses nothing and sends nothing twice', async () => {
    const directPort = await freePort();
    mx = new SmtpSink();
    await mx.start(directPort, '127.0.0.61');
    dns.mx.set('later.test', [{ exchange: 'mx.later.test', priority: 10 }]);
    dns.a.set('mx.later.test', ['127.0.0.61']);
    mx.rules.set('busy@later.test', { rcpt: 'tempfail', times: 1 });

    const relay = new SmtpSink();
    await relay.start();
    const base = await crashTestSvc('direct_restart', relay.port);
    const env = {
      ...base.env,
      DNS_SERVERS: `127.0.0.1:${dns.port}`,
      SMTP_DIRECT_PORT: String(directPort),
      DIRECT_ALLOW_PRIVATE_MX: '1',
    };
    try {
      child = runSvc(['start'], env);
      await waitHealthy(base.base, child);
      const org = await svcJson(['org', 'create', '--name', 'Direct Co'], env);
      await svcJson(['domain', 'create', '--org', org.id, '--name', 'direct.example.test', '--verified'], env);
      const key = await svcJson(['key', 'create', '--org', org.id, '--name', 'k', '--permission', 'send', '--mode', 'live'], env);
      const set = await svcJson(['transport', 'set', '--org', org.id, 'direct'], env);
      assert.equal(set.effective, 'direct');

      const res = await request(base.base, 'POST', '/api/v1/emails', {
        token: key.token,
        body: { from: 'app@direct.example.test', to: 'busy@later.test', subject: 'Later', text: 'once' },
      });
      assert.equal(res.status, 200);
      const id = res.body.id;
      const read = async () => (await request(base.base, 'GET', `/api/v1/emails/${id}`, { token: key.token })).body;
      await waitFor(async () => (await read()).waiting?.reason === 'deferred', 'deferred');

      child.proc.kill('SIGKILL');
      await child.exited;
      // Its time comes while no process runs.
      const db = new Client({ connectionString: base.env.DATABASE_URL });
      await db.connect();
      await db.query(`update emails set retry_at = now() - interval '1 second' where id = $1`, [id]);
      await db.end();

      child = runSvc(['start'], env);
      await waitHealthy(base.base, child);
      const done = await waitFor(async () => {
        const e = await read();
        return e.last_event === 'delivered' ? e : undefined;
      }, 'delivered after the restart');
      await new Promise((r) => setTimeout(r, 1000));
      const got = mx.byMessageId(`<${id}@direct.example.test>`);
      assert.equal(got.length, 1, 'delivered exactly once');
      // As relayed mail: DKIM-signed by the sender domain, with its VERP return path.
      assert.ok(got[0].raw.toString().includes('DKIM-Signature:'));
      assert.match(got[0].envelopeFrom, /^bounces\+.+@bounces\.direct\.example\.test$/);
      assert.equal(relay.received.length, 0, 'never through the relay');
      assert.deepEqual(
        done.events.map((e: { type: string }) => e.type),
        ['queued', 'delivery_delayed', 'sent', 'delivered'],
      );
      child.proc.kill('SIGINT');
      assert.equal(await child.exited, 0);
    } finally {
      await relay.stop();
    }
  });
});
