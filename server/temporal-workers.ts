import type { Logger } from 'pino';
import { linkBaseUrl, temporalSettings, webhookHttpOptions, type Config } from './config';
import { Parts } from './parts';
import { buildActivities, deliveryMailer, directMailer } from './activities';
import type { Orm } from '../db/orm';
import { identityDeps } from '../core/domains/identity';
import { createDnsResolver } from '../core/domains/dns';
import { createWebhookHttp } from '../activities/webhook-http';
import { runTemporalWorker } from '../worker/temporal-worker';

export interface TemporalWorkers {
  /** Settles when the workers stopped (after stop() or a fatal error). */
  done: Promise<void>;
  /** Stops the workers, then closes the webhook client and the SMTP connections (not the database). */
  stop(): Promise<void>;
}

/**
 * What `svc worker` runs (ENGINE=temporal): the activities the embedded engine runs in-process
 * (server/activities.ts), with this configuration's identity secrets, links, DNS servers, mailer
 * and webhook client, on the Temporal workers of both task queues. One builder for the command
 * and the tests. Its parts stop in reverse: the workers, the webhook client, then the mailer's
 * pooled SMTP connections (before the relay they hold is gone).
 */
export async function startTemporalWorkers(
  config: Config,
  orm: Orm,
  log: Logger,
  /** The API's port, for the public links the worker makes (unsubscribe, tracking): config.port by default. */
  apiPort = config.port,
  /** Another release's workflow code (the upgrade test); this one's by default. */
  workflowsPath?: string,
): Promise<TemporalWorkers> {
  const parts = new Parts(log);
  try {
    // Without SMTP_URL, relay into the dev inbox that `svc start` runs on DEV_SMTP_PORT.
    const mailer = await parts.add('mailer', deliveryMailer(config, config.devSmtpPort), (m) => m.close());
    const direct = await parts.add('direct mailer', directMailer(config, orm, log), (m) => m.close());
    const webhooks = await parts.add('webhook client', createWebhookHttp(webhookHttpOptions(config)), (w) => w.close());
    const activities = buildActivities(config, {
      orm,
      mailer,
      direct,
      webhooks,
      dns: createDnsResolver(config.dnsServers),
      identity: identityDeps({ ...config, publicUrl: linkBaseUrl(config, apiPort) }),
      log,
      // The outbox and the webhook dispatcher run in `svc start`, not here: their polls (every
      // second) find the mail these activities enqueued and the room an attempt left.
      wake: { outbox: undefined, webhooks: undefined },
    });
    const starting = runTemporalWorker({
      settings: temporalSettings(config),
      activities,
      sendRatePerSecond: config.sendRatePerSecond,
      concurrency: config.workerConcurrency,
      log,
      workflowsPath,
    });
    const running = await parts.add('temporal workers', starting, (r) => r.stop());
    return { done: running.done, stop: () => parts.stop() };
  } catch (err) {
    await parts.stop().catch(() => undefined);
    throw err;
  }
}
