import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { userInfo } from 'node:os';
import pino, { type Logger } from 'pino';
import { Client as PgClient } from 'pg';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { ensureEmbeddedPostgres, type RunningPostgres } from '../db/embedded-postgres';
import { ensureSearchAttributes } from '../worker/temporal-search-attributes';
import { TOOLS_BIN } from './temporal-tools';
import { setUpSchemas } from './temporal-cluster-schema';
import { fixedPorts, freeClusterPorts, httpOk, portOpen, waitFor } from './temporal-cluster-net';
import {
  CLUSTER_DATABASES,
  CLUSTER_SERVICES,
  DYNAMIC_CONFIG_YAML,
  serverConfigYaml,
  uiConfigYaml,
  type ClusterPorts,
  type ClusterService,
} from './temporal-cluster-config';

const TOOLS = ['temporal-server', 'temporal-sql-tool', 'temporal-ui-server'] as const;

/** Whether `npm run tools` built the server, its schema tool and the UI server (it needs Go). */
export function clusterToolsInstalled(): boolean {
  return TOOLS.every((t) => fs.existsSync(path.join(TOOLS_BIN, t)));
}

export interface ClusterOptions {
  /** Its state: PostgreSQL's files, the configuration, each service's log. Kept across starts. */
  dir: string;
  /** The frontend's port; the other services take the ports the server's own sample uses beside it. Absent: free ports. */
  port?: number;
  namespace?: string;
  /** The namespace's retention, in hours (72 by default, as `temporal operator namespace create`'s). */
  retentionHours?: number;
  log?: Logger;
}

/**
 * A Temporal cluster on loopback as the self-hosting guide lays it out: the server built from
 * go.temporal.io/server with persistence and advanced visibility on PostgreSQL (the embedded
 * binaries, in dir/postgres), each of frontend, history, matching and worker its own process
 * finding the others through the membership table, the namespace with its retention and search
 * attributes, and the Temporal UI's server. Tests kill and restart any part of it.
 */
export class TemporalCluster {
  private procs = new Map<ClusterService | 'ui', ChildProcess>();
  private tails = new Map<string, string>();
  private pg?: RunningPostgres;
  readonly namespace: string;

  private constructor(
    readonly dir: string,
    readonly ports: ClusterPorts,
    private readonly o: ClusterOptions,
    private readonly log: Logger,
  ) {
    this.namespace = o.namespace ?? 'default';
  }

  /** 127.0.0.1, not localhost: the SDK would otherwise try ::1 first. */
  get address(): string {
    return `127.0.0.1:${this.ports.grpc.frontend}`;
  }

  get uiUrl(): string {
    return `http://127.0.0.1:${this.ports.ui}`;
  }

  /** Each running service's process id (the bench reads their CPU). */
  pids(): Record<string, number> {
    return Object.fromEntries([...this.procs].filter(([, p]) => p.exitCode === null && p.pid).map(([s, p]) => [s, p.pid!]));
  }

  /** The postmaster of Temporal's PostgreSQL (its CPU is the cluster's too). */
  postgresPid(): number | undefined {
    try {
      return (
        Number(fs.readFileSync(path.join(this.dir, 'postgres-data', 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]) || undefined
      );
    } catch {
      return undefined;
    }
  }

  static async start(o: ClusterOptions): Promise<TemporalCluster> {
    if (!clusterToolsInstalled()) throw new Error('the Temporal server is not built: run `npm run tools` (it needs Go)');
    const ports = o.port ? fixedPorts(o.port) : await freeClusterPorts();
    const cluster = new TemporalCluster(path.resolve(o.dir), ports, o, o.log ?? pino({ level: 'silent' }));
    try {
      await cluster.boot();
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  private async boot(): Promise<void> {
    fs.mkdirSync(path.join(this.dir, 'logs'), { recursive: true });
    // As root, embedded-postgres runs the server as `postgres`, which must reach its folder.
    if (userInfo().uid === 0) fs.chmodSync(this.dir, 0o755);
    this.pg = await ensureEmbeddedPostgres(path.join(this.dir, 'postgres-data'), this.log);
    const db = new URL(this.pg.url);
    const conn = {
      host: db.hostname,
      port: Number(db.port),
      user: decodeURIComponent(db.username),
      password: decodeURIComponent(db.password),
    };
    await setUpSchemas(conn);
    const dynamic = path.join(this.dir, 'config', 'dynamicconfig.yaml');
    fs.mkdirSync(path.join(this.dir, 'config'), { recursive: true });
    fs.mkdirSync(path.join(this.dir, 'ui-config'), { recursive: true });
    fs.writeFileSync(dynamic, DYNAMIC_CONFIG_YAML);
    fs.writeFileSync(
      path.join(this.dir, 'config', 'development.yaml'),
      serverConfigYaml({ ports: this.ports, db: conn, dynamicConfigFile: dynamic }),
      {
        mode: 0o600,
      },
    );
    fs.writeFileSync(path.join(this.dir, 'ui-config', 'development.yaml'), uiConfigYaml({ ports: this.ports, namespace: this.namespace }));
    // The first service to start writes the cluster's metadata; the others, started at once,
    // raced it and one exited ("cluster metadata mismatch"). History goes first, alone.
    this.startService('history');
    await this.waitMetadata();
    for (const s of CLUSTER_SERVICES.filter((s) => s !== 'history')) this.startService(s);
    await this.waitServing();
    await this.registerNamespace();
    this.startUi();
    await waitFor(
      () => httpOk(this.uiUrl),
      'the Temporal UI',
      60_000,
      () => this.tail('ui'),
    );
  }

  /** Starts one service's process (again), with its output kept in dir/logs/<service>.log. */
  startService(s: ClusterService): void {
    const args = ['--root', this.dir, '--config', 'config', '--env', 'development', '--allow-no-auth', 'start', '--service', s];
    this.spawn(s, path.join(TOOLS_BIN, 'temporal-server'), args);
  }

  private startUi(): void {
    this.spawn('ui', path.join(TOOLS_BIN, 'temporal-ui-server'), [
      '--root',
      this.dir,
      '--config',
      'ui-config',
      '--env',
      'development',
      'start',
    ]);
  }

  private spawn(name: ClusterService | 'ui', bin: string, args: string[]): void {
    const out = fs.createWriteStream(path.join(this.dir, 'logs', `${name}.log`), { flags: 'a' });
    const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (c: Buffer) => {
      out.write(c);
      this.tails.set(name, ((this.tails.get(name) ?? '') + c).slice(-8000));
    };
    proc.stdout!.on('data', keep);
    proc.stderr!.on('data', keep);
    proc.once('exit', () => out.end());
    this.procs.set(name, proc);
  }

  /** The last 8 kB a service printed. */
  tail(name: ClusterService | 'ui'): string {
    return this.tails.get(name) ?? '';
  }

  /** Sends a signal to one service (SIGKILL: as a crash) and waits for its process to end. */
  async kill(s: ClusterService | 'ui', signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const p = this.procs.get(s);
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill(signal);
    const timer = setTimeout(() => p.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  }

  /** Stops Temporal's PostgreSQL (fast shutdown) and starts it again on the same files and port. */
  async restartPostgres(downMs = 0): Promise<void> {
    await this.pg?.stop();
    if (downMs) await new Promise((r) => setTimeout(r, downMs));
    this.pg = await ensureEmbeddedPostgres(path.join(this.dir, 'postgres-data'), this.log);
  }

  /**
   * Until every service has joined (its membership port is open: the worker service serves no
   * gRPC of its own) and the frontend answers.
   */
  async waitServing(timeoutMs = 90_000): Promise<void> {
    for (const s of CLUSTER_SERVICES) {
      await waitFor(
        () => portOpen(this.ports.membership[s]),
        `the ${s} service`,
        timeoutMs,
        () => this.exitNote(s),
      );
    }
    await waitFor(
      async () => {
        const c = await Connection.connect({ address: this.address, connectTimeout: 2000 }).catch(() => undefined);
        if (!c) return false;
        try {
          await c.workflowService.getSystemInfo({});
          await c.workflowService.listNamespaces({});
          return true;
        } catch {
          return false;
        } finally {
          await c.close().catch(() => undefined);
        }
      },
      'the frontend',
      timeoutMs,
      () => this.exitNote('frontend'),
    );
  }

  private exitNote(s: ClusterService | 'ui'): string {
    const p = this.procs.get(s);
    const state = p && p.exitCode !== null ? `exited ${p.exitCode}` : 'running';
    return `${s} ${state}:\n${this.tail(s)}`;
  }

  /** The history service wrote the cluster's metadata row. */
  private async waitMetadata(): Promise<void> {
    const url = new URL(this.pg!.url);
    url.pathname = `/${CLUSTER_DATABASES.persistence}`;
    await waitFor(
      async () => {
        const c = new PgClient({ connectionString: url.toString() });
        try {
          await c.connect();
          return ((await c.query('select 1 from cluster_metadata_info limit 1')).rowCount ?? 0) > 0;
        } catch {
          return false;
        } finally {
          await c.end().catch(() => undefined);
        }
      },
      'the cluster metadata',
      60_000,
      () => this.exitNote('history'),
    );
  }

  /** The namespace (retention as given) and the search attributes the engine sets. */
  private async registerNamespace(): Promise<void> {
    const connection = await Connection.connect({ address: this.address });
    try {
      const known = await connection.workflowService.describeNamespace({ namespace: this.namespace }).then(
        () => true,
        () => false,
      );
      if (!known) {
        await connection.workflowService.registerNamespace({
          namespace: this.namespace,
          workflowExecutionRetentionPeriod: msToTs((this.o.retentionHours ?? 72) * 3_600_000),
        });
      }
      // A namespace just registered reaches every frontend's cache within its refresh interval.
      await waitFor(
        async () => ensureSearchAttributes(connection, this.namespace, this.log),
        'the search attributes',
        60_000,
        () => '',
      );
    } finally {
      await connection.close();
    }
  }

  /** Stops every process (SIGTERM, then SIGKILL after 15 s) and PostgreSQL; the folder stays. */
  async stop(): Promise<void> {
    for (const name of ['ui', 'frontend', 'worker', 'matching', 'history'] as const) await this.kill(name, 'SIGTERM');
    await this.pg?.stop();
    this.pg = undefined;
  }
}
