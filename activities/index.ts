import type { SendEmailActivities } from '../workflows/send-email';
import type { SendBatchActivities } from '../workflows/send-batch';
import type { DomainVerificationActivities } from '../workflows/domain-verification';
import type { WebhookDeliveryActivities } from '../workflows/webhook-delivery';
import type { WebhookFirstAttemptsActivities } from '../workflows/webhook-first-attempts';
import type { BroadcastActivities } from '../workflows/broadcast';
import type { AutomationRunActivities } from '../workflows/automation-run';
import type { DkimRotationActivities } from '../workflows/dkim-rotation';
import type { DmarcRampActivities } from '../workflows/dmarc-ramp';
import type { DnsResolver } from '../core/domains/dns';
import type { CloudflareSettings } from '../core/dns-publish/cloudflare';
import { createDeliveryPass, type DeliveryDeps } from './delivery-pass';
import { createSendEmailActivities } from './send-email';
import { createSendBatchActivities } from './send-batch';
import { createDomainVerificationActivities } from './domain-verification';
import { createWebhookDeliveryActivities, type WebhookDeliveryDeps } from './webhook-delivery';
import { createBroadcastActivities, type BroadcastDeps } from './broadcast';
import { createAutomationRunActivities } from './automation-run';
import { createDkimRotationActivities } from './dkim-rotation';
import { createDmarcRampActivities } from './dmarc-ramp';

/** Every activity of every workflow in workflows/index.ts. A new workflow adds its contract here. */
export type Activities = SendEmailActivities &
  SendBatchActivities &
  DomainVerificationActivities &
  WebhookDeliveryActivities &
  WebhookFirstAttemptsActivities &
  BroadcastActivities &
  AutomationRunActivities &
  DkimRotationActivities &
  DmarcRampActivities;
export type ActivityDeps = DeliveryDeps &
  WebhookDeliveryDeps &
  BroadcastDeps & {
    dns: DnsResolver;
    /** Where MTA-STS hosting's records point (PUBLIC_URL): hosting starts when a domain verifies. */
    publicBase?: string;
    /** Where DNS records are published for internal organizations (the DMARC ramp's steps, the DKIM rotation's keys). */
    cloudflare?: CloudflareSettings;
  };

/** Every activity the workflows call, built from narrow dependencies. */
export function createActivities(deps: ActivityDeps): Activities {
  // One pass for both delivery workflows: their SMTP transactions share one send gate.
  const pass = createDeliveryPass(deps);
  return {
    ...createSendEmailActivities(deps, pass),
    ...createSendBatchActivities(deps, pass),
    ...createDomainVerificationActivities(deps),
    ...createWebhookDeliveryActivities(deps),
    ...createBroadcastActivities(deps),
    ...createAutomationRunActivities(deps),
    ...createDkimRotationActivities(deps),
    ...createDmarcRampActivities(deps),
  };
}
