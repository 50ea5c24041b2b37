import type { Logger } from 'pino';
import { linkBaseUrl, temporalSettings, webhookHttpOptions, type Config } from './config';
import type { Orm } from '../db/orm';
import { systemClock } from '../core/clock';
import { identityDeps } from '../core/domains/identity';
import { createDnsResolver } from '../core/domains/dns';
import { createActivities } from '../activities';
import { createThreadMailer } from '../activities/mailer-thread';
import { createWebhookHttp } from '../activities/webhook-http';
import { runTemporalWorker } from '../worker/temporal-worker';

export interface TemporalWorkers {
  /** Settles when the workers stopped (after stop() or a fatal error). */
  done: Promise<void>;
  /** Stops the workers, then closes the SMTP connections and the webhook client (not the database). */
  stop(): Promise<void>;
}

/**
 * What `svc worker` runs (ENGINE=temporal): the activities the embedded engine runs in-process,
 * with this configuration's identity secrets, links, DNS servers, mailer and webhook client, on
 * the Temporal workers of both task queues. One builder for the command and the tests.
 */
export async function startTemporalWorkers(
  config: Config,
  orm: Orm,
  log: Logger,
  /** The API's port, for the public links the worker makes (unsubscribe, tracking): config.port by default. */
  apiPort = config.port,
): Promise<TemporalWorkers> {
  // Without SMTP_URL, relay into the dev inbox that `svc start` runs on DEV_SMTP_PORT.
  const mailer = config.smtpUrl
    ? createThreadMailer(config.smtpUrl, false, config.workerConcurrency)
    : createThreadMailer(`smtp://127.0.0.1:${config.devSmtpPort}`, true, config.workerConcurrency);
  const webhooks = createWebhookHttp(webhookHttpOptions(config));
  const closeClients = () => {
    // Before the relay is gone: pooled SMTP connections would otherwise hold its close.
    mailer.close();
    webhooks.close();
  };
  try {
    const activities = createActivities({
      orm,
      mailer,
      clock: systemClock,
      log: log.child({ component: 'activities' }),
      ...identityDeps({ ...config, publicUrl: linkBaseUrl(config, apiPort) }),
      dns: createDnsResolver(config.dnsServers),
      webhooks,
      sendSlots: config.workerConcurrency * 2,
    });
    const running = await runTemporalWorker({
      settings: temporalSettings(config),
      activities,
      sendRatePerSecond: config.sendRatePerSecond,
      concurrency: config.workerConcurrency,
      log,
    });
    return {
      done: running.done,
      async stop() {
        await running.stop();
        closeClients();
      },
    };
  } catch (err) {
    closeClients();
    throw err;
  }
}
