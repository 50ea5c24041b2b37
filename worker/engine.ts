/** What the API and the CLI need from a workflow engine; DBOS implements it here, Temporal later. */
export interface Engine {
  readonly name: string;
  /** Starts SendEmail with workflow id = email id; starting an existing one is a no-op. */
  startSendEmail(emailId: string): Promise<void>;
  /** Wakes a SendEmail waiting on its timer after the API canceled the message. */
  signalCancel(emailId: string): Promise<void>;
  ready(): boolean;
  stop(): Promise<void>;
}
