import fs from 'node:fs';
import { temporalToolPath } from '../../tools/temporal-tools';
import { DevServer } from '../../tools/dev-server';
import { TemporalCluster, clusterToolsInstalled } from '../../tools/temporal-cluster';
import { tempDir } from './pg';
import { skipBecause } from './skips';

export { DevServer };

/** What the live suites meet: the dev server or the cluster, each with its Web UI. */
export interface LiveServer {
  kind: 'dev' | 'cluster';
  address: string;
  uiUrl: string;
}

let shared: Promise<{ server: LiveServer; stop(): Promise<void> }> | undefined;

/**
 * Which server the live suites run on: `TEMPORAL_LIVE_SERVER=dev` the dev server (one process,
 * SQLite); otherwise the cluster on PostgreSQL (tools/temporal-cluster.ts) as production runs it,
 * when `npm run tools` built it, else the dev server.
 */
function wanted(): 'dev' | 'cluster' {
  return process.env.TEMPORAL_LIVE_SERVER !== 'dev' && clusterToolsInstalled() ? 'cluster' : 'dev';
}

async function startShared(kind: 'dev' | 'cluster'): Promise<{ server: LiveServer; stop(): Promise<void> }> {
  if (kind === 'dev') {
    const dev = await DevServer.start();
    return { server: { kind, address: dev.address, uiUrl: dev.uiUrl }, stop: () => dev.stop() };
  }
  const dir = tempDir('temporal-live-cluster');
  const cluster = await TemporalCluster.start({ dir });
  return {
    server: { kind, address: cluster.address, uiUrl: cluster.uiUrl },
    async stop() {
      await cluster.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The address of a Temporal server for the live suites: TEMPORAL_ADDRESS when given (a server of
 * your own), else the project's cluster or dev server, started once. Skips the suite, with the
 * reason, when neither is there (no Go on this machine: `npm run tools` says so).
 */
export async function liveTemporal(ctx: Mocha.Context): Promise<{ address: string; server?: LiveServer }> {
  if (process.env.TEMPORAL_ADDRESS) return { address: process.env.TEMPORAL_ADDRESS };
  if (!temporalToolPath('temporal')) {
    skipBecause(ctx, 'no Temporal CLI in .tools/bin (run `npm run tools`; it needs Go) and no TEMPORAL_ADDRESS');
  }
  ctx.timeout(Math.max(ctx.timeout(), 180_000));
  shared ??= startShared(wanted());
  const { server } = await shared;
  return { address: server.address, server };
}

/** Root hook: the shared server stops after every file ran. */
export async function stopSharedDevServer(): Promise<void> {
  if (!shared) return;
  const s = shared;
  shared = undefined;
  await (await s.catch(() => undefined))?.stop();
}
