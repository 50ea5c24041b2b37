import pino from 'pino';
import { readConfig, temporalSettings } from '../server/config';
import { createLogger } from '../core/logging';
import { systemClock } from '../core/clock';
import { parseDuration } from '../core/time';
import { isUuid } from '../db/ids';
import { closeUnconfirmedBatch, countUnconfirmed } from '../db/sql/unconfirmed';
import { CLOSE_UNCONFIRMED_SIGNAL } from '../workflows/send-email';
import { closeUnconfirmed } from '../activities/unconfirmed';
import { tellClosedRuns } from '../core/emails/unconfirmed';
import { startTemporalEngine } from '../worker/temporal-engine';
import { UsageError, withDb } from './shared';

// svc email close-unconfirmed and svc email unconfirmed (docs/operations.md).

/** Operator close of a `sent` message: the database decides, then a waiting workflow is told. */
export async function closeUnconfirmedCommand(emailId: string, out: (v: unknown) => void): Promise<void> {
  if (!isUuid(emailId)) throw new UsageError('EMAIL_ID must be an email id');
  const config = readConfig();
  await withDb(async (db) => {
    const { status } = await closeUnconfirmed(db.orm, emailId, systemClock);
    if (status !== 'unconfirmed') {
      throw new Error(`not_closable: email ${emailId} is ${status}; only a sent message can be closed as unconfirmed`);
    }
    // On the embedded engine no workflow waits at `sent` (CONFIRMATION_WINDOW_HOURS is Temporal-only).
    if (config.engine === 'temporal') {
      const log = createLogger(process.env.LOG_LEVEL || 'warn', pino.destination(2));
      const engine = await startTemporalEngine(temporalSettings(config), log, { startsRuns: false });
      try {
        await engine.signal(emailId, CLOSE_UNCONFIRMED_SIGNAL);
      } finally {
        await engine.stop();
      }
    }
    out({ id: emailId, object: 'email', status });
  });
}

/** Messages one statement closes: its audit row lists their ids, so it stays a readable size. */
const UNCONFIRMED_BATCH = 1000;

/** `svc email unconfirmed`: a dry run by default; `--close` closes in batches, each with its audit rows. */
export async function unconfirmedCommand(
  opts: { olderThan: string | undefined; close: boolean; org: string | undefined },
  out: (v: unknown) => void,
): Promise<void> {
  const ms = opts.olderThan === undefined ? null : parseDuration(opts.olderThan);
  if (ms === null) throw new UsageError('--older-than must be a positive duration: 90m, 36h, 3d, 2w or ISO 8601 (P3D, PT36H)');
  if (opts.org !== undefined && !isUuid(opts.org)) throw new UsageError('--org must be an organization id');
  const config = readConfig();
  const scope = { cutoff: new Date(Date.now() - ms), organizationId: opts.org ?? null };
  await withDb(async (db) => {
    if (!opts.close) {
      const { count, oldestSentAt } = await countUnconfirmed(db.orm, scope);
      out({
        object: 'unconfirmed_report',
        older_than: opts.olderThan,
        cutoff: scope.cutoff.toISOString(),
        count,
        oldest_sent_at: oldestSentAt?.toISOString() ?? null,
      });
      return;
    }
    const log = createLogger(process.env.LOG_LEVEL || 'warn', pino.destination(2));
    // A Temporal workflow may still wait at `sent` (CONFIRMATION_WINDOW_HOURS): tell it, best effort.
    const engine = config.engine === 'temporal' ? await startTemporalEngine(temporalSettings(config), log, { startsRuns: false }) : null;
    let closed = 0;
    let batches = 0;
    try {
      for (;;) {
        const rows = await closeUnconfirmedBatch(db.orm, { ...scope, limit: UNCONFIRMED_BATCH });
        if (rows.length === 0) break;
        closed += rows.length;
        batches += 1;
        process.stderr.write(`batch ${batches}: closed ${rows.length} (${closed} so far)\n`);
        await tellClosedRuns(
          engine,
          rows.map((r) => r.id),
        );
      }
    } finally {
      await engine?.stop();
    }
    out({ object: 'unconfirmed_close', cutoff: scope.cutoff.toISOString(), closed, batches });
  });
}
