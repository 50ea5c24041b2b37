import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { linkBaseUrl, temporalSettings, verificationTiming, webhookHttpOptions, type Config } from './config';
import { openDatabase, type Database } from './database';
import { openOrm } from '../db/orm';
import { createLogger } from '../core/logging';
import { ERRORS } from '../core/errors';
import { systemClock, type Clock } from '../core/clock';
import { identityDeps } from '../core/domains/identity';
import { createDnsResolver } from '../core/domains/dns';
import { DevInbox } from '../smtp/dev-inbox';
import type { Mailer } from '../activities/mailer';
import { createThreadMailer } from '../activities/mailer-thread';
import { createActivities } from '../activities';
import { APPLICATION_NAME, APPLICATION_VERSION, DBOS_INTERNAL_QUEUE, startDbosEngine } from '../worker/dbos-engine';
import { startTemporalEngine } from '../worker/temporal-engine';
import type { Engine } from '../worker/engine';
import { claimExecutor, type Executor } from '../worker/executors';
import { Outbox } from '../worker/outbox';
import { CapRelease, SendCaps } from '../worker/send-caps';
import { BroadcastDispatcher } from '../worker/broadcast-dispatcher';
import { AutomationDispatcher } from '../worker/automation-dispatcher';
import { DomainVerificationSweep } from '../worker/domain-sweep';
import { EngineRetention } from '../worker/engine-retention';
import { WebhookDispatcher } from '../worker/webhook-dispatcher';
import { createWebhookHttp } from '../activities/webhook-http';
import { createApp } from '../api/app';
import { GroupStore } from '../core/emails/group-store';
import { SmtpRelay } from '../smtp/relay';
import { relayTls } from '../smtp/tls';
import { InboundListener } from '../smtp/inbound';
import { InboundProcessor } from '../worker/inbound-processor';

export interface Service {
  url: string;
  port: number;
  db: Database;
  engine: Engine;
  /** The embedded engine's executor id (null on Temporal). */
  executorId: string | null;
  inbox: DevInbox | null;
  /** The SMTP relay's listener (null with SMTP_RELAY_PORT=off). */
  relay: SmtpRelay | null;
  /** The bounce and feedback listener (null with INBOUND_SMTP_PORT=off). */
  inbound: InboundListener | null;
  /** The release step of the daily caps (kick: a pass now). */
  capRelease: CapRelease;
  /** Starts a pass of the outbox soon. */
  kickOutbox(): void;
  log: Logger;
  stop(): Promise<void>;
}

/** How often parked mail is looked at besides the pass just after each UTC midnight (a limit raised during the day). */
const CAP_RELEASE_INTERVAL_MS = 15_000;

/** The inbound listener's SIZE: a bounce or a feedback report quotes at most the original message. */
const INBOUND_MAX_BYTES = 10 * 1024 * 1024;

/** Whether HOST exposes the API beyond this machine: anything but a loopback address or `localhost`. */
export function beyondLoopback(host: string): boolean {
  if (host === 'localhost' || host === '::1') return false;
  return !/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

export interface ServiceOptions {
  log?: Logger;
  mailer?: Mailer;
  /** The clock of the daily caps (the outbox's UTC day, the release step); tests step it across midnight. */
  clock?: Clock;
  /** This process was taken for dead and its work taken over: it must stop at once (default: exit 70). */
  onExecutorLost?: () => void;
}

/**
 * One process: database (embedded or not), migrations, the API, the dev inbox, and either the
 * embedded engine with its workers or a Temporal client (workers then run in `svc worker`).
 */
export async function startService(config: Config, opts: ServiceOptions = {}): Promise<Service> {
  const log = opts.log ?? createLogger(config.logLevel);
  const clock = opts.clock ?? systemClock;
  if (config.production && !config.smtpUrl && !opts.mailer) {
    throw new Error('SMTP_URL is required with NODE_ENV=production: the development inbox is for development only');
  }
  if (config.production && config.smtpRelay && !config.smtpRelay.tlsCertFile) {
    // A generated certificate nobody can verify invites clients to turn verification off.
    throw new Error('the SMTP relay needs SMTP_RELAY_TLS_CERT and SMTP_RELAY_TLS_KEY with NODE_ENV=production (or SMTP_RELAY_PORT=off)');
  }
  // Bind the port first: until the database and the engine are up, every request (and /health)
  // gets 503, so orchestrators and scripts can tell "starting" from "down".
  let handler: http.RequestListener = (_req, res) => {
    res.writeHead(ERRORS.starting.status, { 'content-type': 'application/json', 'retry-after': '1' });
    res.end(JSON.stringify({ status: 'starting', error: { code: 'starting', message: 'the service is starting; retry shortly' } }));
  };
  const server = http.createServer((req, res) => handler(req, res));
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const db = await openDatabase(config, log);
  let inbox: DevInbox | null = null;
  let mailer = opts.mailer;
  if (!mailer && !config.smtpUrl) {
    // With Temporal the inbox still lives here; `svc worker` relays into it on DEV_SMTP_PORT.
    inbox = new DevInbox(path.join(config.dataDir, 'inbox'), log.child({ component: 'dev-inbox' }));
    await inbox.start(config.devSmtpPort);
  }
  const { secrets, platform, returnPaths, links } = identityDeps({
    ...config,
    publicUrl: linkBaseUrl(config, (server.address() as AddressInfo).port),
  });
  const dns = createDnsResolver(config.dnsServers);
  // Workers get their own pool so a backlog of deliveries never queues API requests behind it.
  const workerOrm = await openOrm(db.url, config.workerDbPoolSize);
  let engine: Engine;
  let executor: Executor | null = null;
  const webhookOptions = webhookHttpOptions(config);
  const webhookHttp = createWebhookHttp(webhookOptions);
  // Bound once the dispatcher exists: each recorded attempt may leave room in an endpoint's window.
  let dispatcher: WebhookDispatcher | undefined;
  // Bound once the outbox exists: a broadcast's pages wake it.
  let outbox: Outbox | undefined;
  if (config.engine === 'temporal') {
    engine = await startTemporalEngine(temporalSettings(config), log.child({ component: 'temporal' }));
  } else {
    // Claimed before the engine launches: DBOS's start-up recovery then covers this process's own work only.
    executor = await claimExecutor({
      orm: workerOrm,
      dataDir: config.dataDir,
      configuredId: config.workerId,
      deadAfterSeconds: config.workerDeadAfterSeconds,
      log: log.child({ component: 'executor' }),
      onLost: opts.onExecutorLost ?? (() => process.exit(70)),
    });
    mailer ??= inbox
      ? createThreadMailer(`smtp://127.0.0.1:${inbox.port}`, true, config.workerConcurrency)
      : createThreadMailer(config.smtpUrl!, false, config.workerConcurrency);
    const activities = createActivities({
      orm: workerOrm,
      mailer,
      clock: systemClock,
      log: log.child({ component: 'activities' }),
      secrets,
      returnPaths,
      links,
      dns,
      webhooks: webhookHttp,
      afterWebhookAttempt: () => dispatcher?.kick(),
      afterEnqueue: () => outbox?.kick(),
      // Twice the pool's connections: each has its next message ready when one ends.
      sendSlots: config.workerConcurrency * 2,
    });
    try {
      engine = await startDbosEngine({
        databaseUrl: db.url,
        activities,
        retryBaseSeconds: config.retryBaseSeconds,
        log,
        workerConcurrency: config.workerConcurrency,
        executorId: executor.id,
        applicationVersion: APPLICATION_VERSION,
      });
    } catch (err) {
      await executor.stop();
      throw err;
    }
    executor.takeOver({ internalQueue: DBOS_INTERNAL_QUEUE, applicationName: APPLICATION_NAME });
  }
  const timing = verificationTiming(config);
  const caps = new SendCaps({
    orm: workerOrm,
    platformDailyCap: config.platformDailyCap,
    clock,
    log: log.child({ component: 'send-caps' }),
  });
  outbox = new Outbox(workerOrm, engine, log.child({ component: 'outbox' }), {
    confirmationWindowMs: config.temporal?.confirmationWindowMs ?? 0,
    scheduleLeadMs: config.temporal?.scheduleLeadMs,
    caps,
    clock,
    sendRatePerSecond: config.sendRatePerSecond,
    retryBaseSeconds: config.retryBaseSeconds,
  });
  outbox.start();
  const capRelease = new CapRelease(caps, {
    clock,
    log: log.child({ component: 'cap-release' }),
    intervalMs: CAP_RELEASE_INTERVAL_MS,
    onRelease: () => outbox.kick(),
  });
  capRelease.start();
  const sweep = new DomainVerificationSweep(
    workerOrm,
    engine,
    timing,
    log.child({ component: 'domain-sweep' }),
    config.domainVerifySweepSeconds * 1000,
  );
  sweep.start();
  // Finished workflows leave DBOS's tables after ENGINE_RETENTION_HOURS; Temporal keeps its own history.
  const retention =
    config.engine === 'embedded'
      ? new EngineRetention(workerOrm, {
          retentionMs: config.engineRetentionHours * 3_600_000,
          log: log.child({ component: 'engine-retention' }),
        })
      : null;
  retention?.start();
  const broadcasts = new BroadcastDispatcher(workerOrm, engine, log.child({ component: 'broadcast-dispatcher' }));
  broadcasts.start();
  const automations = new AutomationDispatcher(workerOrm, engine, systemClock, log.child({ component: 'automation-dispatcher' }));
  automations.start();
  dispatcher = new WebhookDispatcher(workerOrm, db.url, engine, log.child({ component: 'webhook-dispatcher' }), {
    concurrencyPerEndpoint: config.webhookConcurrency,
  });
  await dispatcher.start();
  // One group commit for sends, whichever ingress they come by.
  const store = new GroupStore(db.orm, log);
  const app = createApp({
    orm: db.orm,
    store,
    engine,
    log,
    maxBodyBytes: config.maxBodyBytes,
    inbox: inbox ?? undefined,
    inboxAdminOnly: beyondLoopback(config.host),
    dispatch: () => outbox.kick(),
    startBroadcasts: () => broadcasts.kick(),
    automations: () => automations.kick(),
    domains: { secrets, dns, platform, clock: systemClock, verification: timing, warmup: config.domainWarmup },
    caps: { platformDailyCap: config.platformDailyCap, clock },
    links,
    webhooks: {
      secrets,
      policy: webhookOptions,
      dispatch: () => dispatcher?.kick(),
    },
  });
  handler = app.callback();
  const relayTlsPair = config.smtpRelay
    ? await relayTls({ certFile: config.smtpRelay.tlsCertFile, keyFile: config.smtpRelay.tlsKeyFile, dataDir: config.dataDir })
    : null;
  let relay: SmtpRelay | null = null;
  if (config.smtpRelay && relayTlsPair) {
    const r = config.smtpRelay;
    relay = new SmtpRelay(
      { orm: db.orm, store, dispatch: () => outbox.kick(), log: log.child({ component: 'smtp-relay' }) },
      {
        port: r.port,
        tlsPort: r.tlsPort,
        host: config.host,
        tls: relayTlsPair,
        allowInsecureAuth: r.allowInsecureAuth,
        maxConnectionsPerKey: r.maxConnectionsPerKey,
        idleSeconds: r.idleSeconds,
        maxMessageBytes: config.maxBodyBytes,
      },
    );
    await relay.start();
  }
  // Returned mail is applied by every process (whichever listener stored it); the listener is per process too.
  const inboundProcessor = new InboundProcessor(workerOrm, returnPaths, systemClock, log.child({ component: 'inbound-processor' }));
  inboundProcessor.start();
  let inbound: InboundListener | null = null;
  if (config.inboundSmtpPort !== null) {
    inbound = new InboundListener(
      { orm: db.orm, returnPaths, log: log.child({ component: 'inbound-smtp' }), stored: () => inboundProcessor.kick() },
      { port: config.inboundSmtpPort, host: config.host, maxMessageBytes: INBOUND_MAX_BYTES, tls: relayTlsPair, idleSeconds: 60 },
    );
    await inbound.start();
  }
  const port = (server.address() as AddressInfo).port;
  const url = config.publicUrl ?? `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${port}`;

  log.info(
    {
      url,
      engine: engine.name,
      executorId: executor?.id ?? null,
      smtpRelayPort: relay?.port ?? null,
      smtpRelayTlsPort: relay?.tlsPort ?? null,
      inboundSmtpPort: inbound?.port ?? null,
    },
    'service started',
  );

  let stopped = false;
  return {
    url,
    port,
    db,
    engine,
    executorId: executor?.id ?? null,
    inbox,
    relay,
    inbound,
    capRelease,
    kickOutbox: () => outbox.kick(),
    log,
    async stop() {
      if (stopped) return;
      stopped = true;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await relay?.stop();
      await inbound?.stop();
      await inboundProcessor.stop();
      await capRelease.stop();
      await outbox.stop();
      await sweep.stop();
      await retention?.stop();
      await broadcasts.stop();
      await automations.stop();
      await dispatcher?.stop();
      await engine.stop();
      webhookHttp.close();
      await executor?.stop();
      await workerOrm.close();
      mailer?.close();
      if (inbox) await inbox.stop();
      await db.close();
      log.info('service stopped');
    },
  };
}
