import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { devServerArgs, temporalToolPath } from './temporal-tools';
import { httpOk, portOpen } from './temporal-cluster-net';

/**
 * A real `temporal server start-dev` (the CLI `npm run tools` builds) on free loopback ports, with
 * its SQLite file in a folder of its own: stopped and started again on the same file, the server
 * keeps its histories. What the tests and the bench run Temporal on.
 */
export class DevServer {
  private proc?: ChildProcess;
  private out = '';
  /** Its SQLite file; undefined: the server keeps its state in memory (gone when it stops). */
  readonly dbFile: string | undefined;

  private constructor(
    readonly port: number,
    readonly uiPort: number,
    readonly metricsPort: number,
    readonly dir: string,
    inMemory: boolean,
  ) {
    this.dbFile = inMemory ? undefined : path.join(dir, 'temporal.sqlite');
  }

  /** Its Prometheus metrics (persistence and service latencies), for profiling. */
  get metricsUrl(): string {
    return `http://127.0.0.1:${this.metricsPort}/metrics`;
  }

  /** 127.0.0.1, not localhost: the SDK would otherwise try ::1 first. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get uiUrl(): string {
    return `http://127.0.0.1:${this.uiPort}`;
  }

  /** The server's process id (its CPU is the bench's to measure). */
  get pid(): number | undefined {
    return this.proc?.pid;
  }

  static async start(opts: { inMemory?: boolean } = {}): Promise<DevServer> {
    if (!temporalToolPath('temporal')) throw new Error('the Temporal CLI is not installed: run `npm run tools` (it needs Go)');
    const [port, uiPort, metricsPort] = await freePorts(3);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'temporal-dev-'));
    const server = new DevServer(port, uiPort, metricsPort, dir, opts.inMemory ?? false);
    try {
      await server.resume();
    } catch (err) {
      await server.stop();
      throw err;
    }
    return server;
  }

  /** Starts the server process (again) on its ports and SQLite file, and waits until it serves. */
  async resume(): Promise<void> {
    this.out = '';
    const proc = spawn(
      temporalToolPath('temporal')!,
      devServerArgs({ port: this.port, uiPort: this.uiPort, metricsPort: this.metricsPort, dbFile: this.dbFile }),
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    proc.stdout!.on('data', (c) => (this.out = (this.out + c).slice(-20_000)));
    proc.stderr!.on('data', (c) => (this.out = (this.out + c).slice(-20_000)));
    this.proc = proc;
    const deadline = Date.now() + 60_000;
    // The UI comes up last: once it answers, the frontend and the namespace are ready.
    while (!(await portOpen(this.port)) || !(await httpOk(this.uiUrl))) {
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

  /** The last 20 kB the server printed. */
  output(): string {
    return this.out;
  }

  /** Stops it and removes its folder. */
  async stop(): Promise<void> {
    await this.halt();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** `n` distinct free loopback ports (all held open at once while chosen). */
export async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<net.Server>((resolve) => {
          const s = net.createServer();
          s.listen(0, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as net.AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}
