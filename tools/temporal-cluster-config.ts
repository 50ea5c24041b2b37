/** The services of a Temporal cluster, one process each, in the order they are started. */
export const CLUSTER_SERVICES = ['history', 'matching', 'frontend', 'worker'] as const;
export type ClusterService = (typeof CLUSTER_SERVICES)[number];

export interface ClusterPorts {
  /** gRPC and membership (ringpop) port of each service. */
  grpc: Record<ClusterService, number>;
  membership: Record<ClusterService, number>;
  /** The frontend's HTTP API. */
  http: number;
  ui: number;
}

export interface ClusterDatabase {
  host: string;
  port: number;
  user: string;
  password: string;
}

/** The databases the schema tool sets up: persistence, and advanced visibility beside it. */
export const CLUSTER_DATABASES = { persistence: 'temporal', visibility: 'temporal_visibility' } as const;

/**
 * As the self-hosting guide and the server's own config/development-postgres12.yaml set it up:
 * the `postgres12` plugin for persistence and for (advanced) visibility, each on its own database,
 * 4 history shards, every service bound to loopback. Archival is off (not configured), as is the
 * version check (a call to a host on the internet). Values are JSON-quoted, which is YAML too.
 */
export function serverConfigYaml(o: { ports: ClusterPorts; db: ClusterDatabase; dynamicConfigFile: string }): string {
  const q = (v: string) => JSON.stringify(v);
  const store = (database: string, conns: number) => `      sql:
        pluginName: "postgres12"
        databaseName: ${q(database)}
        connectAddr: ${q(`${o.db.host}:${o.db.port}`)}
        connectProtocol: "tcp"
        user: ${q(o.db.user)}
        password: ${q(o.db.password)}
        maxConns: ${conns}
        maxIdleConns: ${conns}
        maxConnLifetime: "1h"`;
  const service = (s: ClusterService) => `  ${s}:
    rpc:
      grpcPort: ${o.ports.grpc[s]}
      membershipPort: ${o.ports.membership[s]}
      bindOnLocalHost: true${s === 'frontend' ? `\n      httpPort: ${o.ports.http}` : ''}`;
  return `log:
  stdout: true
  level: "warn"

persistence:
  defaultStore: "postgres-default"
  visibilityStore: "postgres-visibility"
  numHistoryShards: 4
  datastores:
    postgres-default:
${store(CLUSTER_DATABASES.persistence, 20)}
    postgres-visibility:
${store(CLUSTER_DATABASES.visibility, 10)}

global:
  membership:
    maxJoinDuration: "30s"
    broadcastAddress: "127.0.0.1"

services:
${CLUSTER_SERVICES.map(service).join('\n')}

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: "active"
  currentClusterName: "active"
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: "frontend"
      rpcAddress: ${q(`127.0.0.1:${o.ports.grpc.frontend}`)}

dcRedirectionPolicy:
  policy: "noop"

dynamicConfigClient:
  filepath: ${q(o.dynamicConfigFile)}
  pollInterval: "10s"
`;
}

/**
 * The version check off; search attributes the engine adds are seen by the next start at once
 * (as on the dev server), rather than after the frontend's cache expires.
 */
export const DYNAMIC_CONFIG_YAML = `frontend.enableServerVersionCheck:
  - value: false
system.forceSearchAttributesCacheRefreshOnRead:
  - value: true
`;

/** The Temporal UI's server, on loopback, pointed at the cluster's frontend. */
export function uiConfigYaml(o: { ports: ClusterPorts; namespace: string }): string {
  return `temporalGrpcAddress: ${JSON.stringify(`127.0.0.1:${o.ports.grpc.frontend}`)}
host: "127.0.0.1"
port: ${o.ports.ui}
publicPath: ""
enableUi: true
defaultNamespace: ${JSON.stringify(o.namespace)}
notifyOnNewVersion: false
refreshInterval: "1m"
cors:
  cookieInsecure: true
`;
}
