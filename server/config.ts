import { isIP } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SCHEDULE_LEAD_MS } from '../worker/engine';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import type { TemporalSettings } from '../worker/temporal-engine';

/** Everything the process reads from its environment, parsed once at boot. */
export interface Config {
  /** PostgreSQL URL; when unset an embedded PostgreSQL is started in DATA_DIR/postgres. */
  databaseUrl: string | undefined;
  /** Folder for the embedded database, the development inbox and credentials.json. */
  dataDir: string;
  /** HTTP port of the API (0 picks a free port). */
  port: number;
  /** Interface the API binds to. */
  host: string;
  /** Outbound relay, e.g. smtp://user:pass@host:587; unset means the built-in development inbox. */
  smtpUrl: string | undefined;
  /** Port of the development inbox's SMTP sink when SMTP_URL is unset (0 picks a free port). */
  devSmtpPort: number;
  /** Workflow engine: `embedded` (DBOS on the service's PostgreSQL, in-process) or `temporal`. */
  engine: 'embedded' | 'temporal';
  /** Temporal connection and queues; present when ENGINE=temporal. */
  temporal: TemporalConfig | undefined;
  /** First retry delay of a transient delivery failure, in seconds; doubles on each of the 4 attempts. */
  retryBaseSeconds: number;
  /** Live messages handed to the relay per second across the platform (the spec's worker send rate). */
  sendRatePerSecond: number;
  /** SendEmail workflows running at once per process and queue. */
  workerConcurrency: number;
  /** Connections in the workers' own PostgreSQL pool, apart from the API's. */
  workerDbPoolSize: number;
  /** Largest request body accepted, in bytes (413 beyond). */
  maxBodyBytes: number;
  /** Connections in the application's PostgreSQL pool. */
  dbPoolSize: number;
  /** pino level: trace, debug, info, warn, error, silent. */
  logLevel: string;
  /** PUBLIC_URL: the address printed in the banner and the base of unsubscribe links (unset: http://localhost:PORT for links). */
  publicUrl: string | undefined;
  /** DNS_SERVERS: resolvers for domain verification (`host` or `host:port`, comma-separated); unset: the system's. */
  dnsServers: string[] | undefined;
  /** CLOUDFLARE_API_BASE_URL: the Cloudflare API publishing calls (tests only: a local one); unset: Cloudflare's. */
  cloudflareApiBaseUrl: string | undefined;
  /** SECRETS_KEY: base64 of 32 bytes encrypting DKIM private keys; unset: generated in DATA_DIR/secrets.key. */
  secretsKey: string | undefined;
  /** PLATFORM_MAIL_DOMAIN: the service's own mail domain; return-path records point at feedback-smtp.<it> (MX) and _spf.<it> (SPF). */
  platformMailDomain: string;
  /** DOMAIN_VERIFY_FIRST_DELAY_SECONDS: wait before the second DNS check of a new domain; doubles up to an hour. */
  domainVerifyFirstDelaySeconds: number;
  /** DOMAIN_VERIFY_WINDOW_HOURS: how long a new domain is re-checked before it waits for "verify now". */
  domainVerifyWindowHours: number;
  /** DOMAIN_VERIFY_SWEEP_SECONDS: how often pending domains get their verification loop (re)started if it is not running. */
  domainVerifySweepSeconds: number;
  /** DKIM_CHECK_INTERVAL_SECONDS / DKIM_MIN_SPREAD_SECONDS / DKIM_RETIRING_HOURS / DKIM_ROTATION_WINDOW_HOURS: DkimRotation's timing (docs/domains.md). */
  dkimRotation: { checkIntervalSeconds: number; minSpreadSeconds: number; retiringHours: number; windowHours: number };
  /** WORKER_ID: this process's executor id on the embedded engine; unset: one kept in DATA_DIR/worker-id.<host>. */
  workerId: string | undefined;
  /** WORKER_DEAD_AFTER_SECONDS: a process whose heartbeat is this old is dead, and its unfinished work is taken over. */
  workerDeadAfterSeconds: number;
  /** ENGINE_RETENTION_HOURS: the embedded engine's finished workflows are deleted this long after they finish (fractions allowed; 0 keeps them). */
  engineRetentionHours: number;
  /** CONSOLE_IDLE_MINUTES: a console session unused this long ends (the operator signs in again). */
  consoleIdleMinutes: number;
  /** CONSOLE_MAX_HOURS: a console session ends this long after sign-in, however active. */
  consoleMaxHours: number;
  /** NODE_ENV=production: tokens are never printed, and first start creates no keys (use `svc key create`). */
  production: boolean;
  /** WEBHOOK_ALLOW_HTTP: webhook URLs may use plain http (default: on in development, off with NODE_ENV=production). */
  webhookAllowHttp: boolean;
  /** WEBHOOK_ALLOW_PRIVATE: webhooks may reach loopback and private addresses (default: on in development, off in production). */
  webhookAllowPrivate: boolean;
  /** WEBHOOK_CONCURRENCY: POSTs in flight at once to one endpoint, per process. */
  webhookConcurrency: number;
  /** PLATFORM_DAILY_CAP: live recipients per UTC day across all organizations (0: no platform cap). */
  platformDailyCap: number;
  /** DOMAIN_WARMUP=on|off: new domains start at warm-up stage 1 (200 a day, climbing) or with no domain cap. */
  domainWarmup: boolean;
  /** SMTP relay listener; null when SMTP_RELAY_PORT=off. */
  smtpRelay: SmtpRelayConfig | null;
  /** INBOUND_SMTP_PORT: the bounce and feedback listener, the MX of every return-path host (default 2525 in development, 25 in production; 0 picks a free port; `off`: null, none). */
  inboundSmtpPort: number | null;
  /** Direct delivery to recipients' MX (docs/delivery.md), for organizations and domains set to `direct`. */
  direct: DirectConfig;
}

export interface DirectConfig {
  /** SMTP_DIRECT_PORT: the port direct delivery connects to on an MX (default 25; tests set another). */
  port: number;
  /** DIRECT_ALLOW_PRIVATE_MX=1: an MX may resolve to loopback or private addresses (tests and development; refused with NODE_ENV=production). */
  allowPrivateMx: boolean;
  /** SMTP_HELO_NAME: the name direct delivery gives in EHLO (default this host's name); its source IPs' PTR should name it. */
  heloName: string;
  /** SMTP_SOURCE_IPS: local addresses direct delivery binds, in turn per site (comma-separated; unset: the system chooses). */
  sourceIps: string[];
  /** RETRY_MAX_AGE_HOURS: a message an MX keeps refusing for now is given up (failed) this long after it was due (default 96). */
  retryMaxAgeHours: number;
  /** DELIVERY_SHAPING_FILE: JSON of per-site limits (connections, messages per connection and per minute); unset: core/delivery/default-shaping.json. */
  shapingFile: string | null;
}

export interface SmtpRelayConfig {
  /** SMTP_RELAY_PORT: submission port with STARTTLS (default 2587 in development, 587 in production; 0 picks a free port; `off` disables the relay). */
  port: number;
  /** SMTP_RELAY_TLS_PORT: a second port speaking implicit TLS (usually 465); unset: none. */
  tlsPort: number | null;
  /** SMTP_RELAY_TLS_CERT / SMTP_RELAY_TLS_KEY: PEM files; unset: a self-signed pair generated once in DATA_DIR (refused in production). */
  tlsCertFile: string | null;
  tlsKeyFile: string | null;
  /** SMTP_RELAY_ALLOW_INSECURE: AUTH without STARTTLS (default: on in development, off with NODE_ENV=production). */
  allowInsecureAuth: boolean;
  /** SMTP_RELAY_MAX_CONNECTIONS_PER_KEY: authenticated connections one API key may hold open at once. */
  maxConnectionsPerKey: number;
  /** SMTP_RELAY_IDLE_SECONDS: a connection silent this long is closed (421). */
  idleSeconds: number;
}

export interface TemporalConfig extends Omit<TemporalSettings, 'retryBaseSeconds'> {
  /** CONFIRMATION_WINDOW_HOURS: how long a `sent` message's workflow waits for a delivery event or an operator's close (default 72). */
  confirmationWindowMs: number;
  /** TEMPORAL_SCHEDULE_LEAD_SECONDS: mail scheduled further ahead gets its SendEmail run at once, on a durable timer (default 60). */
  scheduleLeadMs: number;
}

function int(name: string, fallback: number, env: NodeJS.ProcessEnv): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got ${JSON.stringify(raw)}`);
  return n;
}

export function readConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const engine = env.ENGINE || 'embedded';
  if (engine !== 'embedded' && engine !== 'temporal') throw new Error(`ENGINE must be embedded or temporal, got ${JSON.stringify(engine)}`);
  if (engine === 'embedded' && env.CONFIRMATION_WINDOW_HOURS) {
    // On DBOS a waiting workflow keeps its queue slot, so live mail would stall behind open windows.
    throw new Error('CONFIRMATION_WINDOW_HOURS needs ENGINE=temporal; on the embedded engine use `svc email close-unconfirmed`');
  }
  return {
    databaseUrl: env.DATABASE_URL || undefined,
    dataDir: path.resolve(env.DATA_DIR || '.data'),
    port: int('PORT', 3000, env),
    host: env.HOST || '127.0.0.1',
    smtpUrl: env.SMTP_URL || undefined,
    devSmtpPort: int('DEV_SMTP_PORT', 2526, env),
    engine,
    temporal: engine === 'temporal' ? readTemporalConfig(env) : undefined,
    retryBaseSeconds: int('RETRY_BASE_SECONDS', 30, env),
    sendRatePerSecond: int('SEND_RATE_PER_SECOND', 12, env),
    workerConcurrency: int('WORKER_CONCURRENCY', 8, env),
    workerDbPoolSize: int('WORKER_DB_POOL_SIZE', 5, env),
    maxBodyBytes: int('MAX_BODY_BYTES', 40 * 1024 * 1024, env),
    dbPoolSize: int('DB_POOL_SIZE', 10, env),
    logLevel: env.LOG_LEVEL || 'info',
    publicUrl: env.PUBLIC_URL || undefined,
    consoleIdleMinutes: int('CONSOLE_IDLE_MINUTES', 30, env),
    consoleMaxHours: int('CONSOLE_MAX_HOURS', 12, env),
    dnsServers: env.DNS_SERVERS
      ? env.DNS_SERVERS.split(',')
          .map((x) => x.trim())
          .filter(Boolean)
      : undefined,
    secretsKey: env.SECRETS_KEY || undefined,
    cloudflareApiBaseUrl: env.CLOUDFLARE_API_BASE_URL || undefined,
    platformMailDomain: env.PLATFORM_MAIL_DOMAIN || 'mail.svc.test',
    domainVerifyFirstDelaySeconds: int('DOMAIN_VERIFY_FIRST_DELAY_SECONDS', 60, env),
    domainVerifyWindowHours: int('DOMAIN_VERIFY_WINDOW_HOURS', 72, env),
    domainVerifySweepSeconds: int('DOMAIN_VERIFY_SWEEP_SECONDS', 60, env),
    dkimRotation: {
      checkIntervalSeconds: int('DKIM_CHECK_INTERVAL_SECONDS', 120, env),
      minSpreadSeconds: int('DKIM_MIN_SPREAD_SECONDS', 300, env),
      retiringHours: int('DKIM_RETIRING_HOURS', 168, env),
      windowHours: int('DKIM_ROTATION_WINDOW_HOURS', 336, env),
    },
    workerId: workerId(env.WORKER_ID),
    workerDeadAfterSeconds: atLeast('WORKER_DEAD_AFTER_SECONDS', int('WORKER_DEAD_AFTER_SECONDS', 60, env), 2),
    engineRetentionHours: int('ENGINE_RETENTION_HOURS', 24, env),
    production: env.NODE_ENV === 'production',
    webhookAllowHttp: flag('WEBHOOK_ALLOW_HTTP', env.NODE_ENV !== 'production', env),
    webhookAllowPrivate: flag('WEBHOOK_ALLOW_PRIVATE', env.NODE_ENV !== 'production', env),
    webhookConcurrency: atLeast('WEBHOOK_CONCURRENCY', int('WEBHOOK_CONCURRENCY', 16, env), 1),
    platformDailyCap: int('PLATFORM_DAILY_CAP', 45_000, env),
    domainWarmup: onOff('DOMAIN_WARMUP', true, env),
    smtpRelay: readSmtpRelayConfig(env),
    inboundSmtpPort: env.INBOUND_SMTP_PORT === 'off' ? null : int('INBOUND_SMTP_PORT', env.NODE_ENV === 'production' ? 25 : 2525, env),
    direct: readDirectConfig(env),
  };
}

function readDirectConfig(env: NodeJS.ProcessEnv): DirectConfig {
  const allowPrivateMx = flag('DIRECT_ALLOW_PRIVATE_MX', false, env);
  if (allowPrivateMx && env.NODE_ENV === 'production')
    throw new Error('DIRECT_ALLOW_PRIVATE_MX=1 is for tests and development: refused with NODE_ENV=production');
  const sourceIps = (env.SMTP_SOURCE_IPS ?? '')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  const bad = sourceIps.find((ip) => isIP(ip) === 0);
  if (bad !== undefined) throw new Error(`SMTP_SOURCE_IPS must list IP addresses, got ${JSON.stringify(bad)}`);
  return {
    port: int('SMTP_DIRECT_PORT', 25, env),
    allowPrivateMx,
    heloName: env.SMTP_HELO_NAME || os.hostname(),
    sourceIps,
    retryMaxAgeHours: int('RETRY_MAX_AGE_HOURS', 96, env),
    shapingFile: env.DELIVERY_SHAPING_FILE || null,
  };
}

function readSmtpRelayConfig(env: NodeJS.ProcessEnv): SmtpRelayConfig | null {
  if (env.SMTP_RELAY_PORT === 'off') return null;
  const production = env.NODE_ENV === 'production';
  const cert = env.SMTP_RELAY_TLS_CERT || null;
  const key = env.SMTP_RELAY_TLS_KEY || null;
  if ((cert === null) !== (key === null)) throw new Error('SMTP_RELAY_TLS_CERT and SMTP_RELAY_TLS_KEY go together: set both or neither');
  return {
    port: int('SMTP_RELAY_PORT', production ? 587 : 2587, env),
    tlsPort: env.SMTP_RELAY_TLS_PORT ? int('SMTP_RELAY_TLS_PORT', 0, env) : null,
    tlsCertFile: cert,
    tlsKeyFile: key,
    allowInsecureAuth: flag('SMTP_RELAY_ALLOW_INSECURE', !production, env),
    maxConnectionsPerKey: atLeast('SMTP_RELAY_MAX_CONNECTIONS_PER_KEY', int('SMTP_RELAY_MAX_CONNECTIONS_PER_KEY', 20, env), 1),
    idleSeconds: atLeast('SMTP_RELAY_IDLE_SECONDS', int('SMTP_RELAY_IDLE_SECONDS', 60, env), 1),
  };
}

function flag(name: string, fallback: boolean, env: NodeJS.ProcessEnv): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw !== '0' && raw !== '1') throw new Error(`${name} must be 0 or 1, got ${JSON.stringify(raw)}`);
  return raw === '1';
}

function onOff(name: string, fallback: boolean, env: NodeJS.ProcessEnv): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw !== 'on' && raw !== 'off') throw new Error(`${name} must be on or off, got ${JSON.stringify(raw)}`);
  return raw === 'on';
}

/** The base of unsubscribe links: PUBLIC_URL, or this machine's API on `port` (the bound one). */
export const linkBaseUrl = (config: Pick<Config, 'publicUrl'>, port: number) => config.publicUrl ?? `http://localhost:${port}`;

/** The webhook client's policy and limits, from the configuration. */
export function webhookHttpOptions(config: Pick<Config, 'webhookAllowHttp' | 'webhookAllowPrivate' | 'webhookConcurrency'>) {
  return {
    allowHttp: config.webhookAllowHttp,
    allowPrivate: config.webhookAllowPrivate,
    concurrencyPerEndpoint: config.webhookConcurrency,
  };
}

function atLeast(name: string, n: number, min: number): number {
  if (n < min) throw new Error(`${name} must be at least ${min}, got ${n}`);
  return n;
}

function workerId(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  if (!/^[A-Za-z0-9._-]{1,100}$/.test(raw)) throw new Error('WORKER_ID may hold 1 to 100 of A-Z a-z 0-9 . _ -');
  return raw;
}

/** The Temporal settings of a configuration read with ENGINE=temporal. */
export function temporalSettings(config: Config): TemporalSettings {
  if (!config.temporal) throw new Error('ENGINE=temporal is required for this');
  const { confirmationWindowMs: _window, scheduleLeadMs: _lead, ...settings } = config.temporal;
  return { ...settings, retryBaseSeconds: config.retryBaseSeconds };
}

function readTemporalConfig(env: NodeJS.ProcessEnv): TemporalConfig {
  // envconfig reads the same variables and profile files as the `temporal` CLI, TLS and API keys included.
  const loaded = loadClientConnectConfig({ overrideEnvVars: env as Record<string, string> });
  const taskQueue = env.TEMPORAL_TASK_QUEUE || 'svc-mail';
  return {
    // 127.0.0.1, not localhost: `svc temporal dev` listens on IPv4 loopback only, and localhost may resolve to ::1 first.
    connection: { ...loaded.connectionOptions, address: loaded.connectionOptions.address || '127.0.0.1:7233' },
    namespace: loaded.namespace || 'default',
    taskQueue,
    deliveryTaskQueue: env.TEMPORAL_DELIVERY_TASK_QUEUE || `${taskQueue}-delivery`,
    confirmationWindowMs: int('CONFIRMATION_WINDOW_HOURS', 72, env) * 3_600_000,
    scheduleLeadMs: int('TEMPORAL_SCHEDULE_LEAD_SECONDS', SCHEDULE_LEAD_MS / 1000, env) * 1000,
  };
}

/** The DomainVerification loop's timing, from the configuration. */
export function verificationTiming(config: Pick<Config, 'domainVerifyFirstDelaySeconds' | 'domainVerifyWindowHours'>) {
  return {
    firstDelayMs: config.domainVerifyFirstDelaySeconds * 1000,
    maxDelayMs: 3_600_000,
    windowMs: config.domainVerifyWindowHours * 3_600_000,
  };
}
