import assert from 'node:assert/strict';
import { Client as PgClient } from 'pg';
import pino from 'pino';
import { readConfig } from '../../server/config';
import { startService, type Service } from '../../server/service';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { newDatabase } from './pg';
import { SmtpSink } from './sink';
import { request } from './http';
import { testConfig } from './service';
import { runSvc, TEST_SECRETS_KEY, waitWorkerPolling, type Child } from './child';
import { sleep, waitFor } from './wait';

/**
 * A drain under faults on ENGINE=temporal: the API in this process, `svc worker`s as processes of
 * their own, an SMTP sink as the relay counting each Message-ID, and one organization whose live
 * batches are the backlog. The fault suites (a dev server's, a cluster's) break the engine around it.
 */
export interface DrainRig {
  service: Service;
  sink: SmtpSink;
  databaseUrl: string;
  queue: string;
  workers: Child[];
  /** Starts one more `svc worker` and waits until it polls. */
  startWorker(): Promise<Child>;
  alive(w: Child): boolean;
  /** `n` live messages through POST /emails/batch, 100 a request; returns their ids. */
  sendMany(n: number): Promise<string[]>;
  statuses(ids: string[]): Promise<Record<string, number>>;
  allSent(ids: string[], timeoutMs: number): Promise<Record<string, number>>;
  /** How many times the sink took each message, by Message-ID. */
  copies(ids: string[]): number[];
  /** How many of `ids` reached the sink at least once. */
  delivered(ids: string[]): number;
  /** Every message reached the sink, each recipient only its own; answers how many went twice or more. */
  assertDrained(ids: string[]): number;
  stop(): Promise<void>;
}

export async function startDrainRig(o: { address: string; name: string; concurrency: number }): Promise<DrainRig> {
  const log = pino({ level: process.env.TEST_LOG_LEVEL || 'silent' });
  const sink = new SmtpSink();
  const smtpUrl = await sink.start();
  const databaseUrl = await newDatabase(`svc_${o.name}`);
  const queue = `svc-mail-${o.name}-${Date.now()}`;
  const env = {
    ENGINE: 'temporal',
    TEMPORAL_ADDRESS: o.address,
    TEMPORAL_TASK_QUEUE: queue,
    // Batches (SendBatch runs of up to 100), the throughput path.
    CONFIRMATION_WINDOW_HOURS: '0',
  };
  // The key the `svc worker`s get (test/support/child.ts): they decrypt the DKIM key this service sealed.
  const config = testConfig({
    databaseUrl,
    smtpUrl,
    engine: 'temporal',
    temporal: readConfig(env).temporal!,
    secretsKey: TEST_SECRETS_KEY,
  });
  const service = await startService(config, { log });
  const workerEnv = {
    ...env,
    DATABASE_URL: databaseUrl,
    DATA_DIR: config.dataDir,
    SMTP_URL: smtpUrl,
    SEND_RATE_PER_SECOND: '1000',
    RETRY_BASE_SECONDS: '1',
    WORKER_CONCURRENCY: String(o.concurrency),
    // 'temporal worker running' is how a test knows the worker polls.
    LOG_LEVEL: 'info',
  };
  const org = await createOrganization(service.db.orm, o.name, 'standard');
  const domain = (await createDomain(service.db.orm, org.id, `${o.name}-${Date.now()}.example.test`, { verified: true, warmup: false }))
    .name;
  const token = (await createKey(service.db.orm, org.id, { name: 'send', permission: 'send', mode: 'live', rateLimit: 1000 })).token;
  const workers: Child[] = [];
  let sent = 0;
  /** Each recipient's one message: recipient → Message-ID. */
  const messageOf = new Map<string, string>();
  const alive = (w: Child) => w.proc.exitCode === null && w.proc.signalCode === null;

  const statuses = async (ids: string[]): Promise<Record<string, number>> => {
    const pg = new PgClient({ connectionString: databaseUrl });
    await pg.connect();
    try {
      const { rows } = await pg.query('select status, count(*)::int as n from emails where id = any($1::uuid[]) group by status', [ids]);
      return Object.fromEntries(rows.map((r) => [r.status, r.n]));
    } finally {
      await pg.end();
    }
  };
  const copies = (ids: string[]): number[] => {
    const byId = new Map<string, number>();
    for (const r of sink.received) byId.set(r.parsed.messageId ?? '', (byId.get(r.parsed.messageId ?? '') ?? 0) + 1);
    return ids.map((id) => byId.get(`<${id}@${domain}>`) ?? 0);
  };

  return {
    service,
    sink,
    databaseUrl,
    queue,
    workers,
    alive,
    async startWorker() {
      const w = runSvc(['worker'], workerEnv);
      workers.push(w);
      await waitWorkerPolling(w);
      return w;
    },
    async sendMany(n) {
      const ids: string[] = [];
      for (let i = 0; i < n; i += 100) {
        const items = Array.from({ length: Math.min(100, n - i) }, () => ({
          from: `Drain <drain@${domain}>`,
          to: `r${++sent}@example.com`,
          subject: `Drain ${sent}`,
          text: 'once',
        }));
        let res = await request(service.url, 'POST', '/api/v1/emails/batch', { token, body: items });
        // The key's 1,000 a second counts each item: wait out the second, as a client would.
        while (res.status === 429) {
          await sleep(1000);
          res = await request(service.url, 'POST', '/api/v1/emails/batch', { token, body: items });
        }
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const got = (res.body as { data: { id: string }[] }).data.map((d) => d.id);
        got.forEach((id, k) => messageOf.set(items[k].to, `<${id}@${domain}>`));
        ids.push(...got);
      }
      return ids;
    },
    statuses,
    allSent: (ids, timeoutMs) =>
      waitFor(
        async () => {
          const s = await statuses(ids);
          return s.sent === ids.length ? s : undefined;
        },
        `${ids.length} messages to be sent`,
        timeoutMs,
        500,
      ),
    copies,
    delivered: (ids) => copies(ids).filter((n) => n > 0).length,
    assertDrained(ids) {
      const counts = copies(ids);
      assert.equal(counts.filter((n) => n === 0).length, 0, 'every message reached the sink');
      for (const r of sink.received)
        assert.equal(r.parsed.messageId, messageOf.get(r.envelopeTo[0]), 'a recipient only ever got its own message');
      return counts.reduce((a, n) => a + n - 1, 0);
    },
    async stop() {
      for (const w of workers) if (alive(w)) w.proc.kill('SIGKILL');
      await service.stop();
      await sink.stop();
    },
  };
}
