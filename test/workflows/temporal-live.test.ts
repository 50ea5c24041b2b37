import { randomBytes } from 'node:crypto';
import { createSecrets } from '../../core/secrets';
import { createWebhookHttp } from '../../activities/webhook-http';
import assert from 'node:assert/strict';
import pino from 'pino';
import { readConfig, temporalSettings, type TemporalConfig } from '../../server/config';
import { startTemporalEngine } from '../../worker/temporal-engine';
import { startService, type Service } from '../../server/service';
import { createActivities } from '../../activities';
import { createSmtpMailer } from '../../activities/mailer';
import { openOrm, type Orm } from '../../db/orm';
import { runTemporalWorker, type RunningTemporalWorker } from '../../worker/temporal-worker';
import { installTemporalRuntime } from '../../worker/temporal-runtime';
import { createDnsResolver } from '../../core/domains/dns';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { sendEmail, CLOSE_UNCONFIRMED_SIGNAL } from '../../workflows/send-email';
import { newDatabase } from '../support/pg';
import { SmtpSink } from '../support/sink';
import { request } from '../support/http';
import { testConfig } from '../support/service';
import { waitFor } from '../support/wait';
import { liveTemporal } from '../support/temporal-server';

/**
 * The send pipeline end to end on ENGINE=temporal: API (client engine) and `svc worker` code in
 * this process, a real Temporal server, a real SMTP sink. The server is the project's own
 * `temporal server start-dev` (`npm run tools` builds it), or TEMPORAL_ADDRESS's; without either
 * every test is skipped, with the reason printed in the summary.
 */
describe('Temporal engine, live: the API and workers against a real Temporal server', function () {
  this.timeout(120_000);
  const log = pino({ level: process.env.TEST_LOG_LEVEL || 'silent' });
  let service: Service;
  let worker: RunningTemporalWorker;
  let workerOrm: Orm;
  let sink: SmtpSink;
  let call: (method: string, path: string, body?: unknown, as?: 'send' | 'test') => ReturnType<typeof request>;
  let domain: string;
  let temporal: TemporalConfig;

  before(async function () {
    const { address } = await liveTemporal(this);
    installTemporalRuntime(log);
    sink = new SmtpSink();
    const smtpUrl = await sink.start();
    const databaseUrl = await newDatabase('svc_temporal');
    // A task queue of its own, so a shared server's other workers never pick these up.
    const queue = `svc-mail-test-${Date.now()}`;
    temporal = readConfig({
      ENGINE: 'temporal',
      TEMPORAL_ADDRESS: address,
      TEMPORAL_NAMESPACE: process.env.TEMPORAL_NAMESPACE ?? 'default',
      TEMPORAL_TASK_QUEUE: queue,
      CONFIRMATION_WINDOW_HOURS: '1',
    }).temporal!;
    service = await startService(testConfig({ databaseUrl, smtpUrl, engine: 'temporal', temporal }), { log });
    workerOrm = await openOrm(service.db.url, 5);
    const activities = createActivities({
      orm: workerOrm,
      mailer: createSmtpMailer(smtpUrl, false),
      clock: { now: () => new Date() },
      log,
      dns: createDnsResolver(undefined),
      secrets: createSecrets(randomBytes(32)),
      webhooks: createWebhookHttp({ allowHttp: true, allowPrivate: true, concurrencyPerEndpoint: 4 }),
    });
    worker = await runTemporalWorker({
      settings: { ...temporal, retryBaseSeconds: 1 },
      activities,
      sendRatePerSecond: 12,
      concurrency: 8,
      log,
    });
    const org = await createOrganization(service.db.orm, 'Temporal live');
    domain = (await createDomain(service.db.orm, org.id, `temporal-${Date.now()}.example.test`, { verified: true })).name;
    const keys = {
      send: (await createKey(service.db.orm, org.id, { name: 'send', permission: 'send', mode: 'live' })).token,
      test: (await createKey(service.db.orm, org.id, { name: 'test', permission: 'send', mode: 'test' })).token,
    };
    call = (method, path, body, as = 'send') => request(service.url, method, path, { token: keys[as], body });
  });

  after(async () => {
    await worker?.stop();
    await workerOrm?.close();
    await service?.stop();
    await sink?.stop();
  });

  const send = async (extra: object = {}, as: 'send' | 'test' = 'send') => {
    const res = await call(
      'POST',
      '/api/v1/emails',
      { from: `Live <live@${domain}>`, to: 'someone@example.com', subject: 'On Temporal', text: 'hi', ...extra },
      as,
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return (res.body as { id: string }).id;
  };
  const settled = (id: string, status: string) =>
    waitFor(
      async () => {
        const got = await call('GET', `/api/v1/emails/${id}`);
        return (got.body as { last_event: string }).last_event === status ? got.body : undefined;
      },
      `email ${id} to be ${status}`,
      60_000,
    );

  it('delivers live mail through the rate-limited delivery queue, once', async () => {
    const to = `once-${Date.now()}@example.com`;
    const id = await send({ to });
    await settled(id, 'sent');
    assert.equal(sink.received.filter((m) => m.envelopeTo.includes(to)).length, 1);
    // A repeated start (dispatcher retry) joins the existing workflow and sends nothing more.
    await service.engine.start(sendEmail, id, { emailId: id });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(sink.received.filter((m) => m.envelopeTo.includes(to)).length, 1);
  });

  it('simulates test mode per the outcome table', async () => {
    await settled(await send({ to: 'bounce@example.com' }, 'test'), 'bounced');
    await settled(await send({ to: 'complaint@example.com' }, 'test'), 'complained');
  });

  it('cancels a scheduled message by signal, and it is never sent', async () => {
    const to = `cancel-${Date.now()}@example.com`;
    const id = await send({ to, scheduled_at: new Date(Date.now() + 3_600_000).toISOString() });
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal((await call('POST', `/api/v1/emails/${id}/cancel`)).status, 200);
    await settled(id, 'canceled');
    assert.equal(sink.received.filter((m) => m.envelopeTo.includes(to)).length, 0);
  });

  it('retries a 4xx with backoff and delivers once', async () => {
    const to = `retry-${Date.now()}@example.com`;
    sink.rules.set(to, { rcpt: 'tempfail', times: 2 });
    await settled(await send({ to }), 'sent');
    assert.equal(sink.received.filter((m) => m.envelopeTo.includes(to)).length, 1);
  });

  it('closes a sent message as unconfirmed by the operator signal', async () => {
    const id = await send({ to: `unconfirmed-${Date.now()}@example.com` });
    await settled(id, 'sent');
    // As an operator would, from outside the API process.
    const operator = await startTemporalEngine(
      temporalSettings({ ...readConfig({}), engine: 'temporal', temporal, retryBaseSeconds: 1 }),
      log,
    );
    try {
      await operator.signal(id, CLOSE_UNCONFIRMED_SIGNAL);
    } finally {
      await operator.stop();
    }
    await settled(id, 'unconfirmed');
  });
});
