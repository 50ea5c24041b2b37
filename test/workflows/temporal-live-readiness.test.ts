import assert from 'node:assert/strict';
import pino from 'pino';
import { readConfig, type Config } from '../../server/config';
import { startService, type Service } from '../../server/service';
import { startTemporalWorkers, type TemporalWorkers } from '../../server/temporal-workers';
import { openOrm, type Orm } from '../../db/orm';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { installTemporalRuntime } from '../../worker/temporal-runtime';
import { FlatConsoleClient, newOperator } from '../support/console';
import { request } from '../support/http';
import { newDatabase } from '../support/pg';
import { testConfig } from '../support/service';
import { liveTemporal } from '../support/temporal-server';
import { waitFor } from '../support/wait';

/**
 * ENGINE=temporal with the API up and no `svc worker` (issue 51): the API accepts mail that
 * waits on the server, so /ready is 503, /health says `degraded` with `workers: none`, and every
 * console page says what to run; once a worker polls both task queues they turn back, and the
 * waiting mail goes. Asked of the real server's DescribeTaskQueue, every 200 ms here.
 */
describe('Temporal engine, live: readiness while no worker polls the task queues', function () {
  this.timeout(120_000);
  const log = pino({ level: process.env.TEST_LOG_LEVEL || 'silent' });
  let config: Config;
  let service: Service | undefined;
  let workerOrm: Orm | undefined;
  let worker: TemporalWorkers | undefined;
  let taskQueue: string;
  let operator: FlatConsoleClient;
  let testKey: string;
  let from: string;

  before(async function () {
    const { address } = await liveTemporal(this);
    installTemporalRuntime(log);
    taskQueue = `svc-mail-live-readiness-${process.pid}-${Date.now()}`;
    const { temporal } = readConfig({
      ENGINE: 'temporal',
      TEMPORAL_ADDRESS: address,
      TEMPORAL_NAMESPACE: process.env.TEMPORAL_NAMESPACE ?? 'default',
      TEMPORAL_TASK_QUEUE: taskQueue,
      CONFIRMATION_WINDOW_HOURS: '0',
    });
    // The API asks every 200 ms (10 s in production): the test waits on answers, not on a clock.
    config = testConfig({
      databaseUrl: await newDatabase('svc_live_readiness'),
      engine: 'temporal',
      temporal: { ...temporal!, workersCheckMs: 200 },
    });
    service = await startService(config, { log });
    const org = await createOrganization(service.db.orm, 'Temporal live readiness', 'standard');
    const domain = await createDomain(service.db.orm, org.id, `readiness-${Date.now()}.example.test`, { verified: true, warmup: false });
    from = `Ready <ready@${domain.name}>`;
    testKey = (await createKey(service.db.orm, org.id, { name: 'test', permission: 'send', mode: 'test', rateLimit: 1000 })).token;
    const op = await newOperator({ service, url: service.url }, null);
    operator = new FlatConsoleClient(service.url);
    assert.equal((await operator.signIn(op.email, op.password)).status, 303);
  });

  after(async () => {
    await worker?.stop();
    await workerOrm?.close();
    await service?.stop();
  });

  const health = (path: '/health' | '/ready') => request(service!.url, 'GET', path);
  const lastEvent = async (id: string) =>
    ((await request(service!.url, 'GET', `/api/v1/emails/${id}`, { token: testKey })).body as { last_event: string }).last_event;

  it('says so while no worker polls, and turns back once one does', async () => {
    const ready = await waitFor(async () => {
      const r = await health('/ready');
      return r.body.workers === 'none' ? r : undefined;
    }, 'the API to find no worker polling');
    assert.equal(ready.status, 503);
    assert.deepEqual(
      { status: ready.body.status, database: ready.body.database, engine: ready.body.engine },
      { status: 'unavailable', database: 'up', engine: 'temporal:up' },
    );
    assert.deepEqual(ready.body.task_queues, [
      { name: taskQueue, type: 'workflow', pollers: 0 },
      { name: config.temporal!.deliveryTaskQueue, type: 'activity', pollers: 0 },
    ]);
    // Liveness: the API itself is up, and says what is missing.
    const live = await health('/health');
    assert.equal(live.status, 200);
    assert.equal(live.body.status, 'degraded');
    assert.equal(live.body.workers, 'none');
    const page = await operator.get('/console/overview');
    assert.equal(page.status, 200);
    assert.match(page.html, new RegExp(`No worker is polling the Temporal task queues ${taskQueue} and ${taskQueue}-delivery`));
    assert.match(page.html, /Start <code>svc worker<\/code>/);

    // Accepted all the same, and waiting: the symptom the answers above explain.
    const sent = await request(service!.url, 'POST', '/api/v1/emails', {
      token: testKey,
      body: { from, to: 'bounce@example.com', subject: 'Waiting for a worker', text: 'hi' },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const id = (sent.body as { id: string }).id;
    assert.equal(await lastEvent(id), 'queued');

    workerOrm = await openOrm(service!.db.url, 5);
    worker = await startTemporalWorkers(config, workerOrm, log, service!.port);
    const back = await waitFor(async () => {
      const r = await health('/ready');
      return r.status === 200 ? r : undefined;
    }, 'readiness once the worker polls');
    assert.equal(back.body.status, 'ok');
    assert.equal(back.body.workers, 'polling');
    assert.ok(
      back.body.task_queues.every((q: { pollers: number }) => q.pollers >= 1),
      JSON.stringify(back.body),
    );
    const liveAgain = await health('/health');
    assert.deepEqual([liveAgain.status, liveAgain.body.status, liveAgain.body.workers], [200, 'ok', 'polling']);
    assert.doesNotMatch((await operator.get('/console/overview')).html, /No worker is polling/);
    await waitFor(async () => (await lastEvent(id)) === 'bounced', 'the waiting message to be simulated', 60_000);
  });
});
