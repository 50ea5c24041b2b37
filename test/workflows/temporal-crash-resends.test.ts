import pino from 'pino';
import { readConfig } from '../../server/config';
import { startService, type Service } from '../../server/service';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { newDatabase } from '../support/pg';
import { SmtpSink } from '../support/sink';
import { testConfig } from '../support/service';
import { runSvc, waitWorkerPolling, type Child } from '../support/child';
import { CrashDrain } from '../support/crash-drain';
import { liveTemporal } from '../support/temporal-server';

/**
 * Issue 43 on ENGINE=temporal: the API in this process, one `svc worker` draining 5,000 messages,
 * killed with SIGKILL three times at random moments and started again each time. A killed worker's
 * delivery pass is retried once its heartbeat times out (30 s), on the restarted worker, and skips
 * every message whose outcome committed: at most 2 × WORKER_CONCURRENCY go again per crash.
 */
describe('Temporal engine: a drain of 5,000 with its worker killed three times resends at most 2 × WORKER_CONCURRENCY per crash', function () {
  this.timeout(300_000);
  const log = pino({ level: process.env.TEST_LOG_LEVEL || 'silent' });
  const CONCURRENCY = 2;
  const MESSAGES = 5000;
  const KILLS = 3;
  let sink: SmtpSink;
  let service: Service;
  let databaseUrl: string;
  let workerEnv: Record<string, string>;
  let worker: Child | undefined;
  let tokens: string[];
  let domain: string;

  before(async function () {
    const { address } = await liveTemporal(this);
    sink = new SmtpSink();
    const smtpUrl = await sink.start();
    databaseUrl = await newDatabase('svc_tcrash');
    const env = {
      ENGINE: 'temporal',
      TEMPORAL_ADDRESS: address,
      TEMPORAL_TASK_QUEUE: `svc-mail-crash-${Date.now()}`,
      // Batches (SendBatch runs of up to 100), the throughput path.
      CONFIRMATION_WINDOW_HOURS: '0',
    };
    const config = testConfig({ databaseUrl, smtpUrl, engine: 'temporal', temporal: readConfig(env).temporal! });
    service = await startService(config, { log });
    workerEnv = {
      ...env,
      DATABASE_URL: databaseUrl,
      DATA_DIR: config.dataDir,
      SMTP_URL: smtpUrl,
      SEND_RATE_PER_SECOND: '1000',
      RETRY_BASE_SECONDS: '1',
      WORKER_CONCURRENCY: String(CONCURRENCY),
      // 'temporal worker running' is how the test knows the worker polls.
      LOG_LEVEL: 'info',
    };
    const org = await createOrganization(service.db.orm, 'Crash', 'standard');
    domain = (await createDomain(service.db.orm, org.id, `crash-${Date.now()}.example.test`, { verified: true, warmup: false })).name;
    // Five keys at 1,000 a second each: the backlog is in before much of it has left.
    tokens = [];
    for (const k of [1, 2, 3, 4, 5])
      tokens.push(
        (await createKey(service.db.orm, org.id, { name: `send-${k}`, permission: 'send', mode: 'live', rateLimit: 1000 })).token,
      );
  });

  after(async () => {
    if (worker && worker.proc.exitCode === null && worker.proc.signalCode === null) worker.proc.kill('SIGKILL');
    await service?.stop();
    await sink?.stop();
  });

  const startWorker = async (): Promise<Child> => {
    const w = runSvc(['worker'], workerEnv);
    await waitWorkerPolling(w);
    return w;
  };

  it('none lost, no recipient with another message, resends per crash within the bound', async () => {
    const drain = new CrashDrain(sink, domain);
    worker = await startWorker();
    await drain.post(service.url, tokens, MESSAGES);
    for (const target of drain.targets(KILLS, drain.distinct())) {
      await drain.killAt(worker, target);
      worker = await startWorker();
    }
    await drain.allSent(databaseUrl, 180_000);
    const perKill = drain.check(2 * CONCURRENCY);
    if (process.env.TEST_REPORT)
      process.stdout.write(`      (resent per kill: ${perKill.join(', ')}; kills after ${drain.marks.join(', ')} arrivals)\n`);
  });
});
