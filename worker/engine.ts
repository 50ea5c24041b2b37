import type { KeyMode } from '../db/entities';
import type { DomainVerificationInput } from '../workflows/domain-verification';

/** What starting a SendEmail needs to know: where it queues and when it may run. */
export interface SendEmailJob {
  emailId: string;
  mode: KeyMode;
  /** scheduled_at; the engine may hold the start until then (the body waits for it either way). */
  notBeforeMs: number | null;
}

/** What the API and the CLI need from a workflow engine: DBOS (embedded) or Temporal. */
export interface Engine {
  readonly name: string;
  /** Starts SendEmail with workflow id = email id; starting an existing one is a no-op. */
  startSendEmail(job: SendEmailJob): Promise<void>;
  /**
   * How many more SendEmail workflows each mode's queue should take now, or null when the engine
   * holds any backlog well (Temporal). The outbox keeps the rest, so a burst of accepted mail does
   * not become a burst of workflow starts that would only wait in the engine's queue.
   */
  sendEmailRoom(): Promise<Record<KeyMode, number> | null>;
  /** Wakes a SendEmail waiting on its timer after the API canceled the message. */
  signalCancel(emailId: string): Promise<void>;
  /** Starts a DomainVerification loop; `workflowId` names one loop of one domain (a restart gets a new id). */
  startDomainVerification(workflowId: string, input: DomainVerificationInput): Promise<void>;
  ready(): boolean;
  stop(): Promise<void>;
}
