import assert from 'node:assert/strict';
import pg from 'pg';
import { SmtpSink } from '../support/sink';
import { runSvc, crashTestSvc, waitHealthy, svcJson, type Child } from '../support/child';
import { request } from '../support/http';
import { waitFor } from '../support/wait';

/**
 * Automation runs asleep in a delay survive the process (SIGKILL, restart): each wakes when its
 * timer is due and sends once; none is lost and none sends twice.
 */
describe('Engine: automation runs sleeping through a restart', function () {
  this.timeout(180_000);
  let sink: SmtpSink;
  let child: Child | undefined;
  let db: pg.Client | undefined;

  before(async () => {
    sink = new SmtpSink();
    await sink.start();
  });
  after(async () => {
    if (child && child.proc.exitCode === null) child.proc.kill('SIGKILL');
    await db?.end();
    await sink.stop();
  });

  it('wakes every run after the restart and sends each message once', async () => {
    const { env, base } = await crashTestSvc('automation_restart', sink.port);
    child = runSvc(['start'], env);
    await waitHealthy(base, child);
    const org = await svcJson(['org', 'create', '--name', 'Automation Co', '--plan', 'standard'], env);
    const domain = 'lifecycle.example.test';
    await svcJson(['domain', 'create', '--org', org.id, '--name', domain, '--verified'], env);
    const key = await svcJson(
      ['key', 'create', '--org', org.id, '--name', 'k', '--permission', 'admin', '--mode', 'live', '--rate', '1000'],
      env,
    );
    const call = (method: string, path: string, body?: unknown) => request(base, method, path, { token: key.token, body });
    const template = await call('POST', '/api/v1/templates', { name: 'Day 1', slug: 'day-1', subject: 'Day one', text: 'Hello' });
    assert.equal(template.status, 201, JSON.stringify(template.body));
    assert.equal((await call('POST', `/api/v1/templates/${template.body.id}/publish`)).status, 201);
    const automation = await call('POST', '/api/v1/automations', {
      name: 'Drip',
      trigger: { event: 'joined' },
      steps: [
        { type: 'delay', duration: 'PT6S' },
        { type: 'send_email', from: `Drip <drip@${domain}>`, template: { slug: 'day-1' } },
      ],
    });
    assert.equal(automation.status, 201, JSON.stringify(automation.body));
    const people = Array.from({ length: 20 }, (_, i) => `sleeper${i}@people.example`);
    for (const email of people) {
      const ev = await call('POST', '/api/v1/events', { name: 'joined', email });
      assert.equal(ev.body.runs, 1, JSON.stringify(ev.body));
    }
    db = new pg.Client({ connectionString: env.DATABASE_URL });
    await db.connect();
    // Every run asleep in its delay, then the process dies without a chance to clean up.
    await waitFor(async () => {
      const { rows } = await db!.query(`select count(*)::int as n from automation_runs where step = 'steps[0]' and status = 'running'`);
      return rows[0].n === people.length;
    }, 'every run asleep');
    child.proc.kill('SIGKILL');
    await child.exited;
    assert.equal(sink.received.length, 0, 'nothing was due before the kill');

    child = runSvc(['start'], env);
    await waitHealthy(base, child);
    await waitFor(
      async () => {
        const { rows } = await db!.query(`select count(*)::int as n from automation_runs where status = 'completed'`);
        return rows[0].n === people.length;
      },
      'every run to complete after the restart',
      90_000,
    );
    await waitFor(async () => sink.received.length >= people.length, 'the messages', 30_000);
    const { rows } = await db.query(
      `select count(*)::int as messages, count(distinct idempotency_key)::int as keys from emails where organization_id = $1`,
      [org.id],
    );
    assert.deepEqual(rows[0], { messages: people.length, keys: people.length });
    assert.deepEqual(sink.received.map((m) => m.envelopeTo[0]).sort(), [...people].sort());
    child.proc.kill('SIGINT');
    assert.equal(await child.exited, 0);
  });
});
