import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { clusterToolsInstalled } from '../../tools/temporal-cluster';
import { pidAlive } from '../../db/embedded-postgres';
import { SEARCH_ATTRIBUTES } from '../../worker/temporal-search-attributes';
import { runSvc } from '../support/child';
import { tempDir } from '../support/pg';
import { skipBecause } from '../support/skips';
import { waitFor } from '../support/wait';

const isFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const srv = net.createServer().once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });

/** A frontend port whose neighbours the cluster takes (-300…-294, +1, +2, +10, +1000) are free. */
async function clusterPort(): Promise<number> {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 10000);
    const around = [0, 1, 2, 10, 1000, -300, -299, -298, -294].map((d) => port + d);
    if ((await Promise.all(around.map(isFree))).every(Boolean)) return port;
  }
}

describe('svc temporal cluster (npm run temporal:cluster): Temporal as production runs it, on one machine', function () {
  this.timeout(180_000);

  it('serves the frontend and the UI on 127.0.0.1 from four service processes on PostgreSQL in DATA_DIR, and Ctrl-C stops every part', async function () {
    if (!clusterToolsInstalled()) skipBecause(this, 'no Temporal server in .tools/bin (run `npm run tools`; it needs Go)');
    const port = await clusterPort();
    const dataDir = tempDir('svc-temporal-cluster');
    const child = runSvc(['temporal', 'cluster', '--port', String(port)], { DATA_DIR: dataDir });
    const dir = path.join(dataDir, 'temporal-cluster');
    let postmaster = 0;
    try {
      await waitFor(
        async () => {
          if (child.proc.exitCode !== null) throw new Error(`svc temporal cluster exited: ${child.output()}`);
          return child.output().includes('Then, in other terminals');
        },
        'the cluster to be up',
        150_000,
      );
      const out = child.output();
      assert.match(out, new RegExp(`Frontend +127\\.0\\.0\\.1:${port}`), 'prints where the frontend is');
      assert.match(out, new RegExp(`Web UI +http://127\\.0\\.0\\.1:${port + 1000}`), 'prints where the UI is');
      assert.equal((await fetch(`http://127.0.0.1:${port + 1000}/`)).status, 200, 'the UI serves');

      const connection = await Connection.connect({ address: `127.0.0.1:${port}` });
      try {
        const got = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
        for (const key of Object.values(SEARCH_ATTRIBUTES)) assert.ok(key.name in (got.customAttributes ?? {}), `${key.name} registered`);
        await new Client({ connection }).workflow.count();
      } finally {
        await connection.close();
      }
      for (const service of ['frontend', 'history', 'matching', 'worker'])
        assert.ok(fs.statSync(path.join(dir, 'logs', `${service}.log`)).isFile(), `${service} logs in DATA_DIR`);
      postmaster = Number(fs.readFileSync(path.join(dir, 'postgres-data', 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
      assert.ok(pidAlive(postmaster), 'its PostgreSQL runs from DATA_DIR');
    } finally {
      child.proc.kill('SIGINT');
    }
    assert.equal(await child.exited, 0, 'Ctrl-C stops it cleanly');
    // Nothing outlives it: the services' ports are free and its PostgreSQL has stopped.
    for (const p of [port, port + 1, port + 2, port + 1000]) assert.ok(await isFree(p), `port ${p} free after the stop`);
    assert.ok(!pidAlive(postmaster), 'its PostgreSQL stopped');
  });
});
