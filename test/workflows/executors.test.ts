import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { newDatabase, tempDir } from '../support/pg';
import { SmtpSink } from '../support/sink';
import { runSvc, freePort, waitHealthy, svcJson, type Child } from '../support/child';
import { request } from '../support/http';
import { sleep, waitFor } from '../support/wait';

/**
 * Two `svc start` processes on one database, each its own executor. The first holds 8 live
 * messages mid-delivery (the relay never answers DATA); starting the second must not re-run them
 * (before, both ran as executor "local" and the second's start-up recovery sent all 8 again).
 * Then the first is killed: its work is taken over once its heartbeat is stale, and not before.
 */
describe('Engine: each process is its own executor; a dead one’s work is taken over only once it is known dead', function () {
  this.timeout(180_000);
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

  it('sends each message exactly once across two processes and a crash', async () => {
    const databaseUrl = await newDatabase('svc_executors');
    const common = {
      DATABASE_URL: databaseUrl,
      SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
      RETRY_BASE_SECONDS: '1',
      WORKER_DEAD_AFTER_SECONDS: '4',
    };
    const start = async () => {
      const port = await freePort();
      const child = runSvc(['start'], { ...common, PORT: String(port), DATA_DIR: tempDir('svc-exec'), DEV_SMTP_PORT: '0' });
      children.push(child);
      const base = `http://127.0.0.1:${port}`;
      await waitHealthy(base, child);
      return { child, base };
    };

    const a = await start();
    const org = await svcJson(['org', 'create', '--name', 'Executors'], common);
    await svcJson(['domain', 'create', '--org', org.id, '--name', 'exec.example.test', '--verified'], common);
    const key = await svcJson(
      ['key', 'create', '--org', org.id, '--name', 'k', '--permission', 'send', '--mode', 'live', '--rate', '100'],
      common,
    );

    // The relay takes each message but never answers DATA: 8 deliveries in flight in process A.
    sink.holdData = true;
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await request(a.base, 'POST', '/api/v1/emails', {
        token: key.token,
        body: { from: 'app@exec.example.test', to: `r${i}@example.com`, subject: `m${i}`, text: 'once' },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      ids.push(res.body.id);
    }
    await waitFor(async () => sink.dataAttempts === 8, '8 deliveries in flight', 30_000);

    // Process B starts on the same database: its own executor, so its recovery leaves A's work alone.
    const b = await start();
    await sleep(2000);
    assert.equal(sink.dataAttempts, 8, 'the second process re-ran nothing of the first');
    const db = new Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      const workers = (await db.query(`select id from workers where id <> 'local' order by started_at`)).rows.map((r) => r.id);
      assert.equal(new Set(workers).size, 2, `two executors: ${workers.join(', ')}`);
    } finally {
      await db.end();
    }

    // A dies mid-delivery. Nothing of it is taken over until it is known dead (no heartbeat for 4 s).
    a.child.proc.kill('SIGKILL');
    await a.child.exited;
    sink.holdData = false;
    await sleep(1500);
    assert.equal(sink.dataAttempts, 8, 'not taken over before the dead-after span');
    const sent = async (id: string) =>
      (await request(b.base, 'GET', `/api/v1/emails/${id}`, { token: key.token })).body.last_event === 'sent';
    await waitFor(async () => (await Promise.all(ids.map(sent))).every(Boolean), 'B to take over and deliver all 8', 60_000);
    await sleep(1000);
    for (const id of ids) assert.equal(sink.byMessageId(`<${id}@exec.example.test>`).length, 1, `${id} delivered exactly once`);
    assert.equal(sink.dataAttempts, 16, '8 interrupted attempts, 8 completed ones');
    assert.match(b.child.output(), /took over the unfinished workflows of dead processes/);

    b.child.proc.kill('SIGINT');
    assert.equal(await b.child.exited, 0);
  });

  it('a second process on the same data folder runs under a fresh id; a WORKER_ID a running process holds is refused', async () => {
    const databaseUrl = await newDatabase('svc_worker_id');
    const env = { DATABASE_URL: databaseUrl, SMTP_URL: `smtp://127.0.0.1:${sink.port}`, DEV_SMTP_PORT: '0' };
    const dataDir = tempDir('svc-wid');
    const started = async (extra: Record<string, string>) => {
      const port = await freePort();
      const child = runSvc(['start'], { ...env, PORT: String(port), DATA_DIR: dataDir, ...extra });
      children.push(child);
      await waitHealthy(`http://127.0.0.1:${port}`, child);
      await waitFor(async () => child.output().includes('Ctrl-C'), 'banner');
      return { child, id: /executor (\S+)/.exec(child.output())![1] };
    };
    const first = await started({});
    const kept = fs.readFileSync(path.join(dataDir, `worker-id.${os.hostname()}`), 'utf8').trim();
    assert.equal(first.id, kept, 'the first process runs under the id kept in its data folder');
    const second = await started({});
    assert.notEqual(second.id, kept);
    assert.match(second.child.output(), /held by a running process; this process runs under a fresh one/);
    const third = runSvc(['start'], { ...env, PORT: String(await freePort()), DATA_DIR: tempDir('svc-wid'), WORKER_ID: kept });
    children.push(third);
    assert.equal(await third.exited, 1);
    assert.match(third.output(), new RegExp(`WORKER_ID ${kept} is held by a running process`));
    for (const c of [first.child, second.child]) {
      c.proc.kill('SIGINT');
      assert.equal(await c.exited, 0);
    }
  });
});
