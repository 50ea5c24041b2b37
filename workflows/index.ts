import type { AnyWorkflowDef } from './definition';
import { sendEmail } from './send-email';
import { sendBatch } from './send-batch';
import { domainVerification } from './domain-verification';
import { webhookDelivery } from './webhook-delivery';
import { webhookFirstAttempts } from './webhook-first-attempts';
import { broadcastFanOut } from './broadcast';
import { automationRun } from './automation-run';
import { dkimRotation } from './dkim-rotation';
import { dmarcRamp } from './dmarc-ramp';

export {
  sendEmail,
  sendBatch,
  domainVerification,
  webhookDelivery,
  webhookFirstAttempts,
  broadcastFanOut,
  automationRun,
  dkimRotation,
  dmarcRamp,
};

/** Every workflow, as the engines register them. A new workflow adds one line here (and one in temporal/index.ts). */
export const WORKFLOWS: readonly AnyWorkflowDef[] = [
  sendEmail,
  sendBatch,
  domainVerification,
  webhookDelivery,
  webhookFirstAttempts,
  broadcastFanOut,
  automationRun,
  dkimRotation,
  dmarcRamp,
];
