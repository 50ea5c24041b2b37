import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { temporalToolPath } from '../../tools/temporal-tools';
import { SEARCH_ATTRIBUTES } from '../../worker/temporal-search-attributes';
import { runSvc, freePort } from '../support/child';
import { tempDir } from '../support/pg';
import { skipBecause } from '../support/skips';
import { waitFor } from '../support/wait';

const isFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const srv = net.createServer().once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });

describe('svc temporal dev (npm run temporal): the dev server for one machine', function () {
  this.timeout(120_000);

  it('serves Temporal and its Web UI on 127.0.0.1, with the search attributes registered, keeps its state in DATA_DIR, and stops on Ctrl-C', async function () {
    if (!temporalToolPath('temporal')) skipBecause(this, 'no Temporal CLI in .tools/bin (run `npm run tools`; it needs Go)');
    let port = await freePort();
    while (port > 64535 || !(await isFree(port + 1000))) port = await freePort();
    const dataDir = tempDir('svc-temporal-dev');
    const child = runSvc(['temporal', 'dev', '--port', String(port)], { DATA_DIR: dataDir });
    try {
      await waitFor(
        async () => {
          if (child.proc.exitCode !== null) throw new Error(`svc temporal dev exited: ${child.output()}`);
          try {
            return (await fetch(`http://127.0.0.1:${port + 1000}/`)).ok;
          } catch {
            return false;
          }
        },
        'the Web UI',
        60_000,
      );
      assert.match(child.output(), new RegExp(`127\\.0\\.0\\.1:${port}`), 'prints where the frontend is');
      assert.match(child.output(), new RegExp(`http://127\\.0\\.0\\.1:${port + 1000}`), 'prints where the UI is');

      const connection = await Connection.connect({ address: `127.0.0.1:${port}` });
      try {
        const got = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
        for (const key of Object.values(SEARCH_ATTRIBUTES)) assert.ok(key.name in (got.customAttributes ?? {}), `${key.name} registered`);
        await new Client({ connection }).workflow.count();
      } finally {
        await connection.close();
      }
      assert.ok(fs.existsSync(path.join(dataDir, 'temporal.sqlite')), 'its state is a file in DATA_DIR');
    } finally {
      child.proc.kill('SIGINT');
    }
    assert.equal(await child.exited, 0, 'Ctrl-C stops it cleanly');
  });
});
