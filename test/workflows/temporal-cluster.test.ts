import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Client as PgClient } from 'pg';
import { Connection } from '@temporalio/client';
import { TemporalCluster, clusterToolsInstalled } from '../../tools/temporal-cluster';
import { CLUSTER_DATABASES } from '../../tools/temporal-cluster-config';
import { startDrainRig, type DrainRig } from '../support/drain-rig';
import { tempDir } from '../support/pg';
import { request } from '../support/http';
import { skipBecause } from '../support/skips';
import { sleep, waitFor } from '../support/wait';

/**
 * ENGINE=temporal on a cluster as it runs in production (tools/temporal-cluster.ts: PostgreSQL
 * persistence and visibility, frontend, history, matching and worker services each its own
 * process), under the faults a cluster has: its history service and its matching service killed
 * with SIGKILL mid-drain and started again, its PostgreSQL restarted, its frontend down for 10 s.
 * The API runs in this process, `svc worker`s as processes of their own; the SMTP sink counts each
 * Message-ID, the database says every message's end. Each time: nothing lost, and what went twice
 * within the bound of docs/temporal.md (an attempt whose result the server lost goes again).
 */
describe('Temporal cluster on PostgreSQL: four services, and each of them failing mid-drain', function () {
  this.timeout(300_000);
  const CONCURRENCY = 4;
  let cluster: TemporalCluster;
  let rig: DrainRig;
  let dir: string;

  before(async function () {
    if (!clusterToolsInstalled()) skipBecause(this, 'no Temporal server in .tools/bin (run `npm run tools`; it needs Go)');
    this.timeout(180_000);
    dir = tempDir('temporal-cluster');
    cluster = await TemporalCluster.start({ dir });
    rig = await startDrainRig({ address: cluster.address, name: 'tcluster', concurrency: CONCURRENCY });
    await rig.startWorker();
  });

  after(async () => {
    await rig?.stop();
    await cluster?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** Temporal's own database, as the schema tool set it up. */
  const temporalSql = async (text: string) => {
    const { port, password } = JSON.parse(fs.readFileSync(`${dir}/postgres-data/postgres.json`, 'utf8'));
    const pg = new PgClient({ host: '127.0.0.1', port, user: 'postgres', password, database: CLUSTER_DATABASES.persistence });
    await pg.connect();
    try {
      return (await pg.query(text)).rows;
    } finally {
      await pg.end();
    }
  };

  /** Sends `n`, lets `before` of them arrive, breaks the cluster, and checks the drain's end. */
  async function drainThrough(n: number, before: number, fault: () => Promise<void>): Promise<void> {
    const ids = await rig.sendMany(n);
    await waitFor(async () => rig.delivered(ids) >= before, `${before} delivered before the fault`, 90_000);
    await fault();
    const atFault = rig.delivered(ids);
    await rig.allSent(ids, 180_000);
    const resent = rig.assertDrained(ids);
    if (process.env.TEST_REPORT) process.stdout.write(`      (${atFault} of ${n} delivered at the fault, ${resent} resent)\n`);
    assert.ok(atFault < n, `the fault came mid-drain (${atFault} of ${n} delivered)`);
    assert.ok(
      rig.workers.every((w) => rig.alive(w)),
      'the workers rode it out',
    );
    // A delivery whose completion the broken part never recorded times out and goes again: at most
    // each send slot's attempt in flight.
    assert.ok(resent <= 2 * CONCURRENCY, `resent ${resent}, at most ${2 * CONCURRENCY}`);
  }

  /** A service killed as in a crash, started again 2 s later, and serving. */
  async function restarted(service: 'history' | 'matching'): Promise<void> {
    await cluster.kill(service);
    await sleep(2000);
    cluster.startService(service);
    await cluster.waitServing();
  }

  it('runs each service in its own process, persistence and visibility on PostgreSQL, the namespace and the UI', async () => {
    const pids = cluster.pids();
    assert.deepEqual(Object.keys(pids).sort(), ['frontend', 'history', 'matching', 'ui', 'worker']);
    assert.equal(new Set(Object.values(pids)).size, 5, 'five processes');
    // Each server process joined the cluster through the membership table.
    const roles = await temporalSql("select distinct role from cluster_membership where last_heartbeat > now() - interval '1 minute'");
    assert.equal(roles.length, 4, `four roles in cluster_membership: ${JSON.stringify(roles)}`);
    const [{ shards }] = await temporalSql('select count(*)::int as shards from shards');
    assert.equal(shards, 4);

    const connection = await Connection.connect({ address: cluster.address });
    try {
      const ns = await connection.workflowService.describeNamespace({ namespace: cluster.namespace });
      assert.equal(Number(ns.config?.workflowExecutionRetentionTtl?.seconds), 72 * 3600);
      const attrs = await connection.operatorService.listSearchAttributes({ namespace: cluster.namespace });
      for (const name of ['SvcOrganization', 'SvcMode', 'SvcStream', 'SvcKind']) assert.ok(attrs.customAttributes?.[name], name);
    } finally {
      await connection.close();
    }
    assert.equal((await fetch(cluster.uiUrl)).status, 200, 'the Temporal UI serves');

    // A drain with nothing failing: each message once.
    const ids = await rig.sendMany(500);
    await rig.allSent(ids, 120_000);
    assert.equal(rig.assertDrained(ids), 0);
  });

  it('the history service killed with SIGKILL mid-drain and started again: nothing lost', async () => {
    await drainThrough(2000, 300, () => restarted('history'));
  });

  it('the matching service killed with SIGKILL mid-drain and started again: nothing lost', async () => {
    await drainThrough(2000, 300, () => restarted('matching'));
  });

  it("Temporal's PostgreSQL restarted mid-drain: nothing lost", async () => {
    await drainThrough(2000, 300, () => cluster.restartPostgres(3000));
  });

  it('the frontend down for 10 s mid-drain: the API keeps accepting, the backlog resumes by itself', async () => {
    const late: string[] = [];
    await drainThrough(1000, 100, async () => {
      await cluster.kill('frontend');
      const down = Date.now();
      // The API stores mail in its outbox while the engine is unreachable.
      late.push(...(await rig.sendMany(200)));
      await sleep(Math.max(0, 10_000 - (Date.now() - down)));
      cluster.startService('frontend');
      await cluster.waitServing();
    });
    await rig.allSent(late, 120_000);
    rig.assertDrained(late);
    // The API's engine is back: ready again.
    await waitFor(async () => (await request(rig.service.url, 'GET', '/ready')).status === 200, 'the API to be ready', 60_000);
  });
});
