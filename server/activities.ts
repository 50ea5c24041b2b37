import type { Logger } from 'pino';
import type { Config } from './config';
import type { Orm } from '../db/orm';
import { systemClock } from '../core/clock';
import type { identityDeps } from '../core/domains/identity';
import type { DnsResolver } from '../core/domains/dns';
import { createActivities, type Activities } from '../activities';
import type { Mailer } from '../activities/mailer';
import { createThreadMailer } from '../activities/mailer-thread';
import type { WebhookPoster } from '../activities/webhook-http';
import { readFileSync } from 'node:fs';
import { Resolver } from 'node:dns/promises';
import { DEFAULT_SHAPING, parseShaping } from '../core/delivery/shaping';
import { createDirectMailer } from '../activities/delivery/direct-mailer';
import { createStsPolicies } from '../activities/delivery/mta-sts-source';

export interface ActivityWiring {
  /** The workers' own pool: a backlog of deliveries never queues API requests behind it. */
  orm: Orm;
  mailer: Mailer;
  /** Direct delivery to recipients' MX, for senders whose transport is `direct` (directMailer below). */
  direct: Mailer;
  webhooks: WebhookPoster;
  dns: DnsResolver;
  identity: Pick<ReturnType<typeof identityDeps>, 'secrets' | 'returnPaths' | 'links' | 'publicBase'>;
  log: Logger;
  /**
   * What the activities wake in this process, named by every caller (undefined: that loop does not
   * run here, and its own poll finds the work): the outbox after a broadcast page or an automation
   * step enqueued mail, the webhook dispatcher after an attempt (it may leave room in the
   * endpoint's window).
   */
  wake: { outbox: (() => void) | undefined; webhooks: (() => void) | undefined };
}

/**
 * The activities every workflow calls, built one way for the embedded engine (`svc start`,
 * server/service.ts) and the Temporal workers (`svc worker`, server/temporal-workers.ts).
 */
export function buildActivities(config: Config, w: ActivityWiring): Activities {
  return createActivities({
    orm: w.orm,
    mailer: w.mailer,
    direct: w.direct,
    retryMaxAgeMs: config.direct.retryMaxAgeHours * 3_600_000,
    retryBaseSeconds: config.retryBaseSeconds,
    clock: systemClock,
    log: w.log.child({ component: 'activities' }),
    secrets: w.identity.secrets,
    returnPaths: w.identity.returnPaths,
    links: w.identity.links,
    publicBase: w.identity.publicBase,
    dns: w.dns,
    cloudflare: { baseURL: config.cloudflareApiBaseUrl },
    webhooks: w.webhooks,
    afterEnqueue: w.wake.outbox,
    afterWebhookAttempt: w.wake.webhooks,
    // Twice the pool's connections: each has its next message ready when one ends.
    sendSlots: config.workerConcurrency * 2,
  });
}

/** The activities' SMTP client: SMTP_URL, else the dev inbox `svc start` runs (on `devInboxPort`) as final destination. */
export function deliveryMailer(config: Config, devInboxPort: number): Mailer {
  return config.smtpUrl
    ? createThreadMailer(config.smtpUrl, false, config.workerConcurrency)
    : createThreadMailer(`smtp://127.0.0.1:${devInboxPort}`, true, config.workerConcurrency);
}

/**
 * The direct transport: each recipient domain's MX (DNS_SERVERS' resolvers), MTA-STS policies
 * cached in PostgreSQL, the shaping file's per-site limits (DELIVERY_SHAPING_FILE, read and
 * checked here, at boot: a bad file stops the start with the field it names).
 */
export function directMailer(config: Config, orm: Orm, log: Logger): Mailer {
  const d = config.direct;
  const shaping = d.shapingFile ? parseShaping(readFileSync(d.shapingFile, 'utf8')) : DEFAULT_SHAPING;
  const dns = new Resolver({ timeout: 5000, tries: 2 });
  if (config.dnsServers?.length) dns.setServers(config.dnsServers);
  const policies = createStsPolicies({
    orm,
    dns,
    clock: systemClock,
    log: log.child({ component: 'mta-sts' }),
    allowPrivate: d.allowPrivateMx,
  });
  const mailer = createDirectMailer({
    dns,
    port: d.port,
    allowPrivateMx: d.allowPrivateMx,
    heloName: d.heloName,
    sourceIps: d.sourceIps,
    shaping,
    policies,
    clock: systemClock,
    log: log.child({ component: 'direct' }),
  });
  return {
    ...mailer,
    send: (msg) => mailer.send(msg),
    close() {
      mailer.close();
      void policies.flush().catch(() => undefined);
    },
  };
}
