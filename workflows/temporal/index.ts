/**
 * The Temporal workflow bundle's entry: each export is a workflow type, named as on the embedded
 * engine. Only engine-free bodies and the binding are imported here; `bundleWorkflowCode` refuses
 * Node modules, so activity implementations can never slip in.
 */
import { sendEmailWorkflow, sendEmailActivityRetry, SEND_EMAIL_SIGNALS, type SendEmailInput, type SendEmailResult } from '../send-email';
import type { SendEmailActivities } from '../../activities/send-email-types';
import { temporalContext, type TemporalBinding } from './binding';
import {
  domainVerificationWorkflow,
  domainVerificationActivityRetry,
  type DomainVerificationInput,
  type DomainVerificationResult,
} from '../domain-verification';
import type { DomainVerificationActivities } from '../../activities/domain-verification-types';

export type TemporalSendEmailInput = SendEmailInput & TemporalBinding;

export async function SendEmail(input: TemporalSendEmailInput): Promise<SendEmailResult> {
  const ctx = temporalContext<SendEmailActivities>(sendEmailActivityRetry, SEND_EMAIL_SIGNALS, input);
  return sendEmailWorkflow(ctx, { emailId: input.emailId, confirmationWindowMs: input.confirmationWindowMs });
}

export async function DomainVerification(input: DomainVerificationInput): Promise<DomainVerificationResult> {
  const ctx = temporalContext<DomainVerificationActivities>(domainVerificationActivityRetry, [], {});
  return domainVerificationWorkflow(ctx, input);
}
