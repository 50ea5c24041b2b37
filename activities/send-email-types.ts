/** The activities SendEmail calls; workflows import these types only, never the implementation. */
export interface LoadForSendResult {
  status: string;
  scheduledAtMs: number | null;
}

export type ClaimResult = { outcome: 'claimed' } | { outcome: 'not_queued'; status: string } | { outcome: 'deferred'; untilMs: number };

export interface DeliverResult {
  status: string;
}

export interface SendEmailActivities {
  loadForSend(emailId: string): Promise<LoadForSendResult>;
  /** Conditional update queued → sending; the single point where cancel and pick-up race. */
  claimForDelivery(emailId: string): Promise<ClaimResult>;
  /** Hands the message to the relay (or simulates it in test mode) and records per-recipient events. */
  deliver(emailId: string): Promise<DeliverResult>;
  /** Marks what is left undelivered as failed after retries ran out. */
  failDelivery(emailId: string, detail: string): Promise<DeliverResult>;
  /** Conditional update sent → unconfirmed (operator action); any other status is left as it is. */
  closeUnconfirmed(emailId: string): Promise<DeliverResult>;
}
