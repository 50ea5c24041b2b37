import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { temporalToolPath, devServerArgs } from '../../tools/temporal-tools';
import { freePort } from './child';
import { tempDir } from './pg';
import { skipBecause } from './skips';

/**
 * A real `temporal server start-dev` (the CLI `npm run tools` builds), on loopback only, with
 * its SQLite file in a temp folder: stop and start it again on the same file and the server
 * keeps its histories, which the fault tests rely on. One per mocha process (sharedDevServer),
 * stopped by the root hook.
 */
export class DevServer {
  private proc?: ChildProcess;
  private out = '';
  readonly dbFile: string;

  private constructor(
    readonly port: number,
    readonly uiPort: number,
    dir: string,
  ) {
    this.dbFile = path.join(dir, 'temporal.sqlite');
  }

  /** 127.0.0.1, not localhost: the SDK would otherwise try ::1 first. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get uiUrl(): string {
    return `http://127.0.0.1:${this.uiPort}`;
  }

  static async start(): Promise<DevServer> {
    const server = new DevServer(await freePort(), await freePort(), tempDir('temporal-dev'));
    await server.resume();
    return server;
  }

  /** Starts the server process (again) on its ports and SQLite file, and waits until it serves. */
  async resume(): Promise<void> {
    const cli = temporalToolPath('temporal')!;
    const metricsPort = await freePort();
    this.out = '';
    const proc = spawn(cli, devServerArgs({ port: this.port, uiPort: this.uiPort, metricsPort, dbFile: this.dbFile }), {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    proc.stdout!.on('data', (c) => (this.out = (this.out + c).slice(-20_000)));
    proc.stderr!.on('data', (c) => (this.out = (this.out + c).slice(-20_000)));
    this.proc = proc;
    const deadline = Date.now() + 60_000;
    // The UI comes up last: once it answers, the frontend and the namespace are ready.
    while (!(await answers(this.port)) || !(await httpOk(this.uiUrl))) {
      if (proc.exitCode !== null) throw new Error(`temporal server start-dev exited ${proc.exitCode}:\n${this.out}`);
      if (Date.now() > deadline) throw new Error(`temporal server start-dev did not start in 60 s:\n${this.out}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Stops the server (SIGTERM, then SIGKILL after 10 s); its SQLite file stays for resume(). */
  async halt(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }

  output(): string {
    return this.out;
  }

  async stop(): Promise<void> {
    await this.halt();
    fs.rmSync(path.dirname(this.dbFile), { recursive: true, force: true });
  }
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });
}

async function httpOk(url: string): Promise<boolean> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(2000) })).ok;
  } catch {
    return false;
  }
}

let shared: Promise<DevServer> | undefined;

/**
 * The address of a Temporal server for the live suites: TEMPORAL_ADDRESS when given (a server of
 * your own), else the project's dev server, started once. Skips the suite, with the reason, when
 * neither is there (no Go on this machine: `npm run tools` says so).
 */
export async function liveTemporal(ctx: Mocha.Context): Promise<{ address: string; server?: DevServer }> {
  if (process.env.TEMPORAL_ADDRESS) return { address: process.env.TEMPORAL_ADDRESS };
  if (!temporalToolPath('temporal')) {
    skipBecause(ctx, 'no Temporal CLI in .tools/bin (run `npm run tools`; it needs Go) and no TEMPORAL_ADDRESS');
  }
  ctx.timeout(Math.max(ctx.timeout(), 90_000));
  shared ??= DevServer.start();
  const server = await shared;
  return { address: server.address, server };
}

/** Root hook: the shared dev server stops after every file ran. */
export async function stopSharedDevServer(): Promise<void> {
  if (!shared) return;
  const s = shared;
  shared = undefined;
  await (await s.catch(() => undefined))?.stop();
}
