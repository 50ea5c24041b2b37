import { CLOSE_UNCONFIRMED_SIGNAL } from '../../workflows/send-email';

/** The engine as a close needs it: which one it is, and a signal to a run. */
export interface RunSignals {
  readonly name: string;
  signal(workflowId: string, signal: string): Promise<void>;
}

/**
 * After a close as `unconfirmed` (`svc email unconfirmed --close`, the console's Unconfirmed
 * page): a Temporal run may still wait at `sent` (CONFIRMATION_WINDOW_HOURS); tell it, best
 * effort, since the database has decided already. On the embedded engine no run waits at `sent`.
 */
export async function tellClosedRuns(engine: RunSignals | null | undefined, emailIds: string[]): Promise<void> {
  if (!engine || engine.name !== 'temporal') return;
  for (const id of emailIds) await engine.signal(id, CLOSE_UNCONFIRMED_SIGNAL).catch(() => undefined);
}
