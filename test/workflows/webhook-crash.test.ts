import assert from 'node:assert/strict';
import { newDatabase, tempDir } from '../support/pg';
import { runSvc, freePort, waitHealthy, svcJson, type Child } from '../support/child';
import { request } from '../support/http';
import { waitFor, sleep } from '../support/wait';
import { WebhookReceiver } from '../support/webhook-receiver';

describe('Engine: a worker killed mid-POST delivers the webhook after restart', function () {
  this.timeout(180_000);
  let receiver: WebhookReceiver;
  let child: Child | undefined;

  before(async () => {
    receiver = new WebhookReceiver();
    await receiver.start();
  });
  after(async () => {
    if (child && child.proc.exitCode === null) child.proc.kill('SIGKILL');
    await receiver.stop();
  });

  it('delivers once completed, with the same webhook-id, and loses nothing', async () => {
    const env = {
      DATABASE_URL: await newDatabase('svc_webhook_crash'),
      PORT: String(await freePort()),
      DEV_SMTP_PORT: '0',
      DATA_DIR: tempDir('svc-webhook-crash'),
    };
    const base = `http://127.0.0.1:${env.PORT}`;
    child = runSvc(['start'], env);
    await waitHealthy(base, child);
    const org = await svcJson(['org', 'create', '--name', 'Hook Crash Co'], env);
    await svcJson(['domain', 'create', '--org', org.id, '--name', 'hooks.example.test', '--verified'], env);
    const admin = await svcJson(['key', 'create', '--org', org.id, '--name', 'a', '--permission', 'admin', '--mode', 'live'], env);
    const test = await svcJson(['key', 'create', '--org', org.id, '--name', 't', '--permission', 'send', '--mode', 'test'], env);
    const hook = await request(base, 'POST', '/api/v1/webhooks', {
      token: admin.token,
      body: { url: `${receiver.url}/crash`, events: ['email.sent'] },
    });
    assert.equal(hook.status, 201, JSON.stringify(hook.body));

    // The receiver takes the POST and never answers: the worker is mid-attempt when it dies.
    receiver.respond = () => 'hang';
    const sent = await request(base, 'POST', '/api/v1/emails', {
      token: test.token,
      body: { from: 'app@hooks.example.test', to: 'someone@example.com', subject: 'Crash', text: 'once' },
    });
    assert.equal(sent.status, 200);
    await waitFor(async () => receiver.received.length === 1, 'the first POST');
    child.proc.kill('SIGKILL');
    await child.exited;

    receiver.respond = () => 200;
    child = runSvc(['start'], env);
    await waitHealthy(base, child);
    const [delivery] = await waitFor(
      async () => {
        const list = await request(base, 'GET', `/api/v1/webhooks/${hook.body.id}/deliveries`, { token: admin.token });
        return list.body.data?.[0]?.status === 'succeeded' ? list.body.data : undefined;
      },
      'the recovered delivery',
      60_000,
    );
    await sleep(1000);
    assert.equal(receiver.received.length, 2, 'one interrupted POST, one completed');
    assert.deepEqual(
      receiver.received.map((r) => r.headers['webhook-id']),
      [delivery.id, delivery.id],
    );
    assert.equal(receiver.received[0].body, receiver.received[1].body);
    assert.equal(receiver.received[1].json.data.email_id, sent.body.id);
    assert.equal(delivery.attempts, 1, 'the interrupted attempt was never recorded');

    child.proc.kill('SIGINT');
    assert.equal(await child.exited, 0);
  });
});
