import type { Orm } from '../db/orm';
import { recordPassOutcomes, type PassOutcomes } from '../db/sql/delivery-pass';
import { GroupCommit } from '../core/group-commit';

/**
 * How long a settled outcome waits for others before its statement starts. Its SMTP send slot is
 * held meanwhile (activities/send-live.ts), so the window costs throughput only past what the slots
 * beyond the pool's connections absorb.
 */
export const OUTCOME_WINDOW_MS = 1;
/** Rows (recipients, events, messages) one statement writes at most; a larger request is written alone. */
const MAX_ROWS = 2000;

const rows = (o: PassOutcomes) => o.recipients.length + o.events.length + o.emails.length;

/** The outcomes of many messages (of many passes) as one statement writes them: the latest time, each list in turn. */
export function mergeOutcomes(all: PassOutcomes[]): PassOutcomes {
  return {
    at: new Date(Math.max(...all.map((o) => o.at.getTime()))),
    recipients: all.flatMap((o) => o.recipients),
    events: all.flatMap((o) => o.events),
    emails: all.flatMap((o) => o.emails),
  };
}

/**
 * Group commit of delivery outcomes (issue 43), one per process: every pass hands in each
 * message's outcome as the relay answers it, and the outcomes of all passes and connections that
 * settled within a few milliseconds are written by one RECORD_OUTCOMES statement
 * (db/sql/delivery-pass.ts), each caller answered once its outcome has committed. A statement that
 * fails is retried one request at a time (core/group-commit.ts), so one message's bad row never
 * fails another's.
 */
export class OutcomeCommit {
  private readonly groups: GroupCommit<PassOutcomes, void>;

  /** `fullAt`: outcomes that start their statement at once, without waiting out the window. */
  constructor(orm: Orm, opts: { windowMs?: number; fullAt: number }) {
    this.groups = new GroupCommit(
      async (all) => {
        await recordPassOutcomes(orm, mergeOutcomes(all));
        return all.map(() => undefined);
      },
      {
        maxInFlight: 4,
        windowMs: opts.windowMs ?? OUTCOME_WINDOW_MS,
        full: (group) => group.length >= opts.fullAt,
        accepts: (group, next) => group.reduce((n, o) => n + rows(o), rows(next)) <= MAX_ROWS,
        alone: (o) => rows(o) >= MAX_ROWS,
      },
    );
  }

  /** Statements run so far. */
  get statements(): number {
    return this.groups.statements;
  }

  /** Resolves once `o` has committed (nothing to write: at once). */
  record(o: PassOutcomes): Promise<void> {
    return rows(o) === 0 ? Promise.resolve() : this.groups.submit(o);
  }
}
