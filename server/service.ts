import path from 'node:path';
import type { Logger } from 'pino';
import { linkBaseUrl, verificationTiming, webhookHttpOptions, type Config } from './config';
import { assertReadyForProduction } from './production-gaps';
import { openDatabase, type Database } from './database';
import { Parts, WakeUp } from './parts';
import { bindHttpPort } from './http-port';
import { addEngine } from './engine';
import { openOrm } from '../db/orm';
import { identifyOperatorVerifiedDomains } from '../core/provisioning';
import { SANDBOX_DOMAIN } from './bootstrap';
import { createLogger } from '../core/logging';
import { systemClock, type Clock } from '../core/clock';
import { identityDeps } from '../core/domains/identity';
import { createDnsResolver } from '../core/domains/dns';
import { TemplateResolver } from '../core/templates/resolver';
import { GroupStore } from '../core/emails/group-store';
import { DevInbox } from '../smtp/dev-inbox';
import { SmtpRelay } from '../smtp/relay';
import { relayTls } from '../smtp/tls';
import { InboundListener } from '../smtp/inbound';
import type { Mailer } from '../activities/mailer';
import { createWebhookHttp } from '../activities/webhook-http';
import type { Engine } from '../worker/engine';
import { Outbox } from '../worker/outbox';
import { CapRelease, SendCaps } from '../worker/send-caps';
import { BroadcastDispatcher } from '../worker/broadcast-dispatcher';
import { AutomationDispatcher } from '../worker/automation-dispatcher';
import { DomainVerificationSweep } from '../worker/domain-sweep';
import { StrandedRunSweep, type StrandedRunOptions } from '../worker/stranded-runs';
import { EngineRetention } from '../worker/engine-retention';
import { WebhookDispatcher } from '../worker/webhook-dispatcher';
import { InboundProcessor } from '../worker/inbound-processor';
import { createApp } from '../api/app';
import { consoleSettings } from './console-settings';

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
  /** Stops every part, the last started first. */
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
  /** ENGINE=temporal: the stranded-run sweep's pace and graces (tests: seconds, not minutes). */
  strandedRuns?: Pick<StrandedRunOptions, 'intervalMs' | 'queuedGraceMs' | 'sendingGraceMs'>;
}

/** The development inbox (no SMTP_URL): what it received, on the web page and over SMTP on DEV_SMTP_PORT. */
async function startDevInbox(config: Config, log: Logger): Promise<DevInbox> {
  const inbox = new DevInbox(path.join(config.dataDir, 'inbox'), log.child({ component: 'dev-inbox' }));
  await inbox.start(config.devSmtpPort);
  return inbox;
}

/**
 * One process: database (embedded or not), migrations, the API, the dev inbox, and either the
 * embedded engine with its workers or a Temporal client (workers then run in `svc worker`).
 * Its parts are the list below, started in order and stopped in reverse (server/parts.ts).
 */
export async function startService(config: Config, opts: ServiceOptions = {}): Promise<Service> {
  const log = opts.log ?? createLogger(config.logLevel);
  const clock = opts.clock ?? systemClock;
  assertReadyForProduction(config, { needsRelay: !opts.mailer, servesRelay: true });
  const parts = new Parts(log);
  // The activities the engine runs wake the outbox and the webhook dispatcher, which need the engine.
  const wake = { outbox: new WakeUp(), webhooks: new WakeUp() };
  try {
    const httpPort = await parts.add('http port', bindHttpPort(config.port, config.host), (h) => h.close());
    const db = await parts.add('database', openDatabase(config, log), (d) => d.close());
    // With Temporal the inbox still lives here; `svc worker` relays into it on DEV_SMTP_PORT.
    const inbox = opts.mailer || config.smtpUrl ? null : await parts.add('dev inbox', startDevInbox(config, log), (i) => i.stop());
    const identity = identityDeps({ ...config, publicUrl: linkBaseUrl(config, httpPort.port) });
    // Domains an operator made verified before `--verified` gave them an identity sign from now on.
    await identifyOperatorVerifiedDomains(db.orm, identity, { except: [SANDBOX_DOMAIN], log: log.child({ component: 'domains' }) });
    const dns = createDnsResolver(config.dnsServers);
    // Workers get their own pool so a backlog of deliveries never queues API requests behind it.
    const workerOrm = await parts.add('worker pool', openOrm(db.url, config.workerDbPoolSize), (o) => o.close());
    const webhookOptions = webhookHttpOptions(config);
    const webhookHttp = await parts.add('webhook client', createWebhookHttp(webhookOptions), (w) => w.close());

    const { engine, executorId } = await addEngine(parts, config, {
      databaseUrl: db.url,
      workerOrm,
      devInboxPort: inbox?.port,
      mailer: opts.mailer,
      onExecutorLost: opts.onExecutorLost,
      webhooks: webhookHttp,
      dns,
      identity,
      log,
      wake: { outbox: wake.outbox.kick, webhooks: wake.webhooks.kick },
    });

    const timing = verificationTiming(config);
    const caps = new SendCaps({
      orm: workerOrm,
      platformDailyCap: config.platformDailyCap,
      clock,
      log: log.child({ component: 'send-caps' }),
    });
    const outbox = await parts.loop(
      'outbox',
      new Outbox(workerOrm, engine, log.child({ component: 'outbox' }), {
        confirmationWindowMs: config.temporal?.confirmationWindowMs ?? 0,
        scheduleLeadMs: config.temporal?.scheduleLeadMs,
        caps,
        clock,
        sendRatePerSecond: config.sendRatePerSecond,
        retryBaseSeconds: config.retryBaseSeconds,
      }),
    );
    wake.outbox.bind(() => outbox.kick());
    const capRelease = await parts.loop(
      'cap release',
      new CapRelease(caps, {
        clock,
        log: log.child({ component: 'cap-release' }),
        intervalMs: CAP_RELEASE_INTERVAL_MS,
        onRelease: () => outbox.kick(),
      }),
    );
    const sweepMs = config.domainVerifySweepSeconds * 1000;
    await parts.loop(
      'domain sweep',
      new DomainVerificationSweep(workerOrm, engine, timing, log.child({ component: 'domain-sweep' }), sweepMs),
    );
    const stranded = { ...opts.strandedRuns, log: log.child({ component: 'stranded-runs' }), clock, onHandBack: () => outbox.kick() };
    await parts.loop('stranded-run sweep', new StrandedRunSweep(workerOrm, engine, stranded));
    // Finished workflows leave DBOS's tables after ENGINE_RETENTION_HOURS; Temporal keeps its own history.
    if (config.engine === 'embedded') {
      const retention = { retentionMs: config.engineRetentionHours * 3_600_000, log: log.child({ component: 'engine-retention' }) };
      await parts.loop('engine retention', new EngineRetention(workerOrm, retention));
    }
    const broadcasts = await parts.loop(
      'broadcast dispatcher',
      new BroadcastDispatcher(workerOrm, engine, log.child({ component: 'broadcast-dispatcher' })),
    );
    const automations = await parts.loop(
      'automation dispatcher',
      new AutomationDispatcher(workerOrm, engine, systemClock, log.child({ component: 'automation-dispatcher' })),
    );
    const dispatcher = await parts.loop(
      'webhook dispatcher',
      new WebhookDispatcher(workerOrm, db.url, engine, log.child({ component: 'webhook-dispatcher' }), {
        concurrencyPerEndpoint: config.webhookConcurrency,
      }),
    );
    wake.webhooks.bind(() => dispatcher.kick());

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
      domains: {
        secrets: identity.secrets,
        dns,
        platform: identity.platform,
        clock: systemClock,
        verification: timing,
        warmup: config.domainWarmup,
      },
      caps: { platformDailyCap: config.platformDailyCap, clock },
      links: identity.links,
      webhooks: { secrets: identity.secrets, policy: webhookOptions, dispatch: () => dispatcher.kick() },
      console: {
        secrets: identity.secrets,
        ...consoleSettings(config, httpPort.port),
        dnsPublish: { dns, cloudflare: { baseURL: config.cloudflareApiBaseUrl } },
      },
    });
    // Its stop closes the port: requests end before the loops behind them stop.
    await parts.add('api', httpPort.serve(app.callback()), () => httpPort.close());
    const r = config.smtpRelay;
    const tls = r ? await relayTls({ certFile: r.tlsCertFile, keyFile: r.tlsKeyFile, dataDir: config.dataDir }) : null;
    const relay =
      r && tls
        ? await parts.loop(
            'smtp relay',
            new SmtpRelay(
              {
                orm: db.orm,
                store,
                templates: new TemplateResolver(db.orm),
                dispatch: () => outbox.kick(),
                log: log.child({ component: 'smtp-relay' }),
              },
              {
                port: r.port,
                tlsPort: r.tlsPort,
                host: config.host,
                tls,
                allowInsecureAuth: r.allowInsecureAuth,
                maxConnectionsPerKey: r.maxConnectionsPerKey,
                idleSeconds: r.idleSeconds,
                maxMessageBytes: config.maxBodyBytes,
              },
            ),
          )
        : null;
    // Returned mail is applied by every process (whichever listener stored it); the listener is per process too.
    const returns = await parts.loop(
      'inbound processor',
      new InboundProcessor(workerOrm, identity.returnPaths, systemClock, log.child({ component: 'inbound-processor' })),
    );
    const inbound =
      config.inboundSmtpPort === null
        ? null
        : await parts.loop(
            'inbound smtp',
            new InboundListener(
              {
                orm: db.orm,
                returnPaths: identity.returnPaths,
                log: log.child({ component: 'inbound-smtp' }),
                stored: () => returns.kick(),
              },
              { port: config.inboundSmtpPort, host: config.host, maxMessageBytes: INBOUND_MAX_BYTES, tls, idleSeconds: 60 },
            ),
          );

    const port = httpPort.port;
    const url = config.publicUrl ?? `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${port}`;
    log.info(
      {
        url,
        engine: engine.name,
        executorId,
        smtpRelayPort: relay?.port ?? null,
        smtpRelayTlsPort: relay?.tlsPort ?? null,
        inboundSmtpPort: inbound?.port ?? null,
      },
      'service started',
    );
    log.debug({ parts: parts.names() }, 'service parts, in start order');
    let stopping: Promise<void> | undefined;
    return {
      url,
      port,
      db,
      engine,
      executorId,
      inbox,
      relay,
      inbound,
      capRelease,
      kickOutbox: () => outbox.kick(),
      log,
      stop() {
        stopping ??= parts.stop().then(() => log.info('service stopped'));
        return stopping;
      },
    };
  } catch (err) {
    await parts.stop().catch(() => undefined);
    throw err;
  }
}
