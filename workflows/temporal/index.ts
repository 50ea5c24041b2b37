/**
 * The Temporal workflow bundle's entry: each export is a workflow type, named as its definition
 * (and as on the embedded engine). Only engine-free bodies and the binding are imported here;
 * `bundleWorkflowCode` refuses Node modules, so activity implementations can never slip in.
 */
import {
  sendEmail,
  sendBatch,
  domainVerification,
  webhookDelivery,
  webhookFirstAttempts,
  broadcastFanOut,
  automationRun,
  dkimRotation,
  dmarcRamp,
} from '..';
import { temporalWorkflow } from './binding';

export const SendEmail = temporalWorkflow(sendEmail);
export const SendBatch = temporalWorkflow(sendBatch);
export const DomainVerification = temporalWorkflow(domainVerification);
export const WebhookDelivery = temporalWorkflow(webhookDelivery);
export const WebhookFirstAttempts = temporalWorkflow(webhookFirstAttempts);
export const BroadcastFanOut = temporalWorkflow(broadcastFanOut);
export const AutomationRun = temporalWorkflow(automationRun);
export const DkimRotation = temporalWorkflow(dkimRotation);
export const DmarcRamp = temporalWorkflow(dmarcRamp);
