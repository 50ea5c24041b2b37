import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { tempDir } from '../support/pg';
import { runSvc, freePort, waitHealthy, type Child } from '../support/child';
import { waitFor } from '../support/wait';

/** What a supervisor allows between its SIGTERM and its SIGKILL. */
const STOP_WITHIN_MS = 10_000;

describe('svc start stops what it started on SIGTERM or SIGINT sent to its process alone', function () {
  this.timeout(240_000);

  // One data folder for the runs: the first initialises PostgreSQL, the others reuse it.
  const dataDir = tempDir('svc-shutdown');
  const pidFile = path.join(dataDir, 'postgres', 'postmaster.pid');
  let child: Child | undefined;

  // A failed run leaves nothing behind for the next (which would reuse a PostgreSQL it did not start).
  afterEach(async () => {
    if (child?.proc.exitCode === null) {
      child.proc.kill('SIGTERM');
      await Promise.race([child.exited, new Promise((resolve) => setTimeout(resolve, STOP_WITHIN_MS))]);
    }
    const left = fs.existsSync(pidFile) ? Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]) : 0;
    if (left > 0 && isAlive(left)) {
      process.kill(left, 'SIGINT');
      await waitFor(async () => !isAlive(left), 'the PostgreSQL a failed run left to stop');
    }
  });

  // `npm start` runs the service under the tsx CLI, whose parent process gets the supervisor's signal.
  const runs = [
    { via: 'tsx', signal: 'SIGTERM' },
    { via: 'tsx', signal: 'SIGINT' },
    { via: 'bin', signal: 'SIGTERM' },
  ] as const;
  for (const { via, signal } of runs) {
    it(`${signal} to the ${via === 'tsx' ? 'tsx CLI process (npm start)' : 'bin/svc.js process'}: the embedded PostgreSQL stops too, within 10 s`, async () => {
      const port = await freePort();
      const svc = (child = runSvc(['start'], { DATA_DIR: dataDir, PORT: String(port), DEV_SMTP_PORT: '0' }, { via }));
      await waitHealthy(`http://127.0.0.1:${port}`, svc, 120_000);
      await waitFor(async () => svc.output().includes('Ctrl-C'), 'banner');
      const pgPid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
      assert.ok(pgPid > 0 && isAlive(pgPid), 'the embedded PostgreSQL runs');

      const sent = Date.now();
      // To this process only, as a supervisor sends it (not to the process group, as a terminal does).
      process.kill(svc.proc.pid!, signal);
      const code = await svc.exited;
      const tookMs = Date.now() - sent;

      assert.ok(tookMs < STOP_WITHIN_MS, `exited ${tookMs} ms after ${signal}`);
      assert.equal(code, 0, svc.output());
      assert.ok(!fs.existsSync(pidFile), 'postmaster.pid removed: PostgreSQL shut down');
      assert.throws(() => process.kill(pgPid, 0), { code: 'ESRCH' }, `PostgreSQL (pid ${pgPid}) is gone`);
      // pg's warning for a second query on a busy client, once printed at every start (server/engine.ts).
      assert.doesNotMatch(svc.output(), /DeprecationWarning/);
    });
  }
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
