import type { Logger } from 'pino';

/**
 * DBOS's warning when a run is started again under its id with another queue name (the outbox
 * or a recovery starting a run that already exists): the run keeps its queue and nothing is
 * wrong, but DBOS appends a stack trace, and every restart printed several (issue 51).
 */
const REQUEUED = /^Workflow \((.+?)\) already exists in queue: (\S*), but the provided queue name is: (\S*)\./;

/** DBOS's logger onto the process's: its info is our debug, and what is expected is not a warning. */
export function dbosLogger(log: Logger) {
  return {
    info: (m: unknown) => log.debug(m as object),
    debug: (m: unknown) => log.trace(m as object),
    warn: (m: unknown) => {
      const requeued = typeof m === 'string' ? REQUEUED.exec(m) : null;
      if (requeued)
        log.debug({ workflowId: requeued[1], queue: requeued[2], asked: requeued[3] }, 'run already started; it keeps its queue');
      else log.warn(m as object);
    },
    error: (m: unknown) => log.error(m as object),
  };
}
