import fs from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';
import { readConfig } from '../server/config';
import { createLogger } from '../core/logging';
import { TemporalCluster, clusterToolsInstalled } from '../tools/temporal-cluster';
import { UsageError } from './shared';
import { onShutdown } from './run';

/**
 * `svc temporal cluster`: the production-shaped cluster of tools/temporal-cluster.ts in the
 * foreground, its state in DATA_DIR/temporal-cluster, until Ctrl-C stops every part of it.
 */
export async function temporalCluster(portFlag: string | undefined): Promise<void> {
  if (!clusterToolsInstalled()) throw new Error('the Temporal server is not built: run `npm run tools` (it builds it with Go)');
  const port = portFlag === undefined ? 7233 : Number(portFlag);
  // The membership ports sit 300 below the frontend's, the UI 1000 above; all below 32768.
  if (!Number.isInteger(port) || port < 1324 || port > 31700) throw new UsageError('--port must be a port number from 1324 to 31700');
  const config = readConfig();
  const log = createLogger(config.logLevel);
  const dir = path.resolve(config.dataDir, 'temporal-cluster');
  // As `svc start` does for its own PostgreSQL: run as root, the server runs as `postgres`, which
  // must traverse DATA_DIR to reach its folder.
  fs.mkdirSync(dir, { recursive: true });
  if (userInfo().uid === 0) fs.chmodSync(config.dataDir, 0o755);
  process.stdout.write(`Starting a Temporal cluster in ${dir} (PostgreSQL, then history, matching, frontend, worker, the UI)\n`);
  const cluster = await TemporalCluster.start({ dir, port, log });
  const { grpc, membership, http, ui } = cluster.ports;
  process.stdout.write(
    [
      `Temporal cluster (state in ${dir}, each service's log in ${path.join(dir, 'logs')})`,
      `  Frontend       ${cluster.address} (HTTP API 127.0.0.1:${http})`,
      `  History        127.0.0.1:${grpc.history}, 4 shards`,
      `  Matching       127.0.0.1:${grpc.matching}`,
      `  Worker         (no gRPC; it joins by membership)`,
      `  Membership     127.0.0.1:${Object.values(membership).join(', ')}`,
      `  Web UI         http://127.0.0.1:${ui}`,
      `  Namespace      ${cluster.namespace} (retention 72 h, the service's search attributes)`,
      `Then, in other terminals:`,
      `  ENGINE=temporal TEMPORAL_ADDRESS=${cluster.address} npm start`,
      `  ENGINE=temporal TEMPORAL_ADDRESS=${cluster.address} npm run worker`,
      '',
    ].join('\n'),
  );
  // Each service drains for a few seconds on SIGTERM; PostgreSQL stops last.
  onShutdown(log, () => cluster.stop(), 45_000);
}
