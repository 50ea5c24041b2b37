import assert from 'node:assert/strict';
import { SmtpSink } from '../support/sink';
import { runSvc, crashTestSvc, waitHealthy, svcJson, type Child } from '../support/child';
import { request } from '../support/http';
import { waitFor } from '../support/wait';

describe('Engine: a worker killed mid-delivery resumes after restart', function () {
  this.timeout(180_000);
  let sink: SmtpSink;
  let child: Child | undefined;

  before(async () => {
    sink = new SmtpSink();
    await sink.start();
  });
  after(async () => {
    if (child && child.proc.exitCode === null) child.proc.kill('SIGKILL');
    await sink.stop();
  });

  it('sends exactly once and loses nothing', async () => {
    const { env, base } = await crashTestSvc('crash', sink.port);

    child = runSvc(['start'], env);
    await waitHealthy(base, child);
    const org = await svcJson(['org', 'create', '--name', 'Crash Co'], env);
    const domain = await svcJson(['domain', 'create', '--org', org.id, '--name', 'crash.example.test', '--verified'], env);
    const key = await svcJson(['key', 'create', '--org', org.id, '--name', 'k', '--permission', 'send', '--mode', 'live'], env);
    assert.equal(domain.status, 'verified');

    // The relay takes the whole message but never answers DATA: the worker is mid-send.
    sink.holdData = true;
    const inData = new Promise<void>((resolve) => (sink.onDataStarted = resolve));
    const res = await request(base, 'POST', '/api/v1/emails', {
      token: key.token,
      body: { from: 'app@crash.example.test', to: 'victim@example.com', subject: 'Crash', text: 'once' },
    });
    assert.equal(res.status, 200);
    const id = res.body.id;
    await inData;
    child.proc.kill('SIGKILL');
    await child.exited;
    assert.equal(sink.byMessageId(`<${id}@crash.example.test>`).length, 0, 'nothing was accepted before the crash');

    sink.holdData = false;
    child = runSvc(['start'], env);
    await waitHealthy(base, child);
    const final = await waitFor(
      async () => {
        const got = await request(base, 'GET', `/api/v1/emails/${id}`, { token: key.token });
        return got.body.last_event === 'sent' ? got.body : undefined;
      },
      'recovered delivery',
      60_000,
    );
    await new Promise((r) => setTimeout(r, 1000));
    const received = sink.byMessageId(`<${id}@crash.example.test>`);
    assert.equal(received.length, 1, 'delivered exactly once');
    assert.equal(sink.dataAttempts, 2, 'one interrupted attempt, one completed');
    assert.deepEqual(
      final.events.map((e: { type: string }) => e.type),
      ['queued', 'sent'],
    );

    child.proc.kill('SIGINT');
    assert.equal(await child.exited, 0, 'Ctrl-C shuts down cleanly');
  });
});
