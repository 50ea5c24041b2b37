import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
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

describe('npm start in a terminal: Ctrl-C (SIGINT to the whole foreground process group)', function () {
  this.timeout(240_000);
  const dataDir = tempDir('svc-ctrl-c');
  const pidFile = path.join(dataDir, 'postgres', 'postmaster.pid');

  it('stops cleanly: PostgreSQL, in a group of its own, is stopped last, so nothing loses its connection', async () => {
    const port = await freePort();
    // util-linux's script(1) runs npm start on a pseudo-terminal; a ^C written to it is what a
    // terminal's line discipline turns into SIGINT for every process of the foreground group.
    const term = spawn('script', ['-qfec', 'npm start', '/dev/null'], {
      cwd: path.resolve(__dirname, '../..'),
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        DATA_DIR: dataDir,
        PORT: String(port),
        DEV_SMTP_PORT: '0',
        SMTP_RELAY_PORT: '0',
        INBOUND_SMTP_PORT: '0',
        LOG_LEVEL: 'info',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    term.stdout!.on('data', (c) => (out += c));
    term.stderr!.on('data', (c) => (out += c));
    const exited = new Promise<number | null>((resolve) => term.on('exit', (code) => resolve(code)));
    try {
      await waitFor(async () => out.includes('Ctrl-C'), 'the banner', 120_000);
      const pgPid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
      term.stdin!.write('\x03');
      const code = await Promise.race([exited, new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), STOP_WITHIN_MS * 2))]);
      assert.notEqual(code, 'late', `still running after Ctrl-C:\n${out.slice(-3000)}`);
      assert.doesNotMatch(
        out,
        /Connection ended unexpectedly|terminating connection due to administrator command|shutdown took too long/,
        out.slice(-3000),
      );
      assert.ok(!fs.existsSync(pidFile), 'PostgreSQL shut down');
      assert.ok(!isAlive(pgPid), `PostgreSQL (pid ${pgPid}) is gone`);
    } finally {
      if (term.exitCode === null) term.kill('SIGKILL');
      const left = fs.existsSync(pidFile) ? Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]) : 0;
      if (left > 0 && isAlive(left)) process.kill(left, 'SIGINT');
    }
  });
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
