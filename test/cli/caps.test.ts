import assert from 'node:assert/strict';
import { Client } from 'pg';
import { newDatabase, tempDir } from '../support/pg';
import { SmtpSink } from '../support/sink';
import { runSvc, freePort, waitHealthy, svcJson, type Child } from '../support/child';
import { request } from '../support/http';
import { sleep, waitFor } from '../support/wait';

/**
 * Two `svc start` processes on one database, 20 senders posting live mail to both at once, an
 * organization cap of 30 for 60 messages: exactly 30 reach the relay and 30 wait parked, whichever
 * process dispatched what. The operator commands (`svc org plan`, `svc domain warmup`) set up the
 * case and are audit-logged.
 */
describe('Daily caps across two processes, and the operator commands', function () {
  this.timeout(240_000);
  let sink: SmtpSink;
  const children: Child[] = [];

  before(async () => {
    sink = new SmtpSink();
    await sink.start();
  });
  after(async () => {
    for (const c of children) if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
    await sink.stop();
  });

  it('counts exactly under 20 concurrent senders on two processes', async () => {
    const databaseUrl = await newDatabase('svc_caps_two');
    const common = { DATABASE_URL: databaseUrl, SMTP_URL: `smtp://127.0.0.1:${sink.port}`, SEND_RATE_PER_SECOND: '200' };
    const start = async () => {
      const port = await freePort();
      const child = runSvc(['start'], { ...common, PORT: String(port), DATA_DIR: tempDir('svc-caps'), DEV_SMTP_PORT: '0' });
      children.push(child);
      const base = `http://127.0.0.1:${port}`;
      await waitHealthy(base, child);
      return base;
    };
    // Both at once on a fresh database: the migrations run under an advisory lock, so one applies
    // them and the other waits and finds nothing left to do.
    const [a, b] = await Promise.all([start(), start()]);

    const org = await svcJson(['org', 'create', '--name', 'Caps', '--plan', 'free'], common);
    const plan = await svcJson(['org', 'plan', org.id, 'standard'], common);
    assert.deepEqual([plan.plan, plan.effective_daily_send_cap], ['standard', 20_000]);
    const domain = await svcJson(['domain', 'create', '--org', org.id, '--name', 'caps.example.test', '--verified'], common);
    const warm = await svcJson(['domain', 'warmup', 'caps.example.test', '--stage', '3'], common);
    assert.deepEqual(warm.warmup, { stage: 3, daily_limit: 1000 });
    const off = await svcJson(['domain', 'warmup', domain.id, '--off'], common);
    assert.deepEqual(off.warmup, { stage: null, daily_limit: null });
    const bad = runSvc(['domain', 'warmup', domain.id, '--stage', '8'], common);
    assert.equal(await bad.exited, 2);
    assert.match(bad.output(), /--stage must be an integer from 1 to 7/);

    const admin = await svcJson(
      ['key', 'create', '--org', org.id, '--name', 'a', '--permission', 'admin', '--mode', 'live', '--rate', '1000'],
      common,
    );
    const send = await svcJson(
      ['key', 'create', '--org', org.id, '--name', 's', '--permission', 'send', '--mode', 'live', '--rate', '1000'],
      common,
    );
    const patched = await request(a, 'PATCH', '/api/v1/organization', { token: admin.token, body: { daily_send_cap: 30 } });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));

    const ids: string[] = [];
    await Promise.all(
      Array.from({ length: 20 }, async (_, sender) => {
        for (let i = 0; i < 3; i++) {
          const res = await request(sender % 2 ? a : b, 'POST', '/api/v1/emails', {
            token: send.token,
            body: { from: 'app@caps.example.test', to: `s${sender}-${i}@example.com`, subject: 'c', text: 'once' },
          });
          assert.equal(res.status, 200, JSON.stringify(res.body));
          ids.push(res.body.id);
        }
      }),
    );
    await waitFor(async () => sink.received.length >= 30, '30 delivered', 60_000);
    const db = new Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      await waitFor(
        async () =>
          (await db.query(`select count(*)::int as n from emails where waiting_reason = 'organization_daily_cap'`)).rows[0].n === 30,
        '30 parked',
      );
      await sleep(1500);
      assert.equal(sink.received.length, 30, 'no more than the cap left');
      const usage = (await request(b, 'GET', '/api/v1/organization', { token: admin.token })).body.daily_usage;
      assert.deepEqual(usage.organization, { limit: 30, sent: 30 });
      const audit = await db.query(
        `select action, details from audit_log where organization_id = $1 and api_key_id is null order by created_at`,
        [org.id],
      );
      assert.deepEqual(
        audit.rows.map((r) => [r.action, r.details.to]),
        [
          ['organization.plan_set', 'standard'],
          ['domain.warmup_set', 3],
          ['domain.warmup_set', null],
        ],
      );
    } finally {
      await db.end();
    }
    assert.equal(ids.length, 60);
  });
});
