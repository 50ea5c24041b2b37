import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { KeyMode, Stream } from '../db/entities';
import type { OutboxRow } from '../db/sql/claim-outbox';
import { ADMITTED_SIGNAL, sendEmail, type SendEmailInput } from '../workflows/send-email';
import { sendBatch, type SendBatchInput } from '../workflows/send-batch';
import type { QueueName } from '../workflows/definition';
import { RunEndedError, type Engine, type RunLabels, type StartOptions } from './engine';

/** Each mode's queue: live mail is rate-limited, test mail only simulated. */
export const QUEUE_OF: Record<KeyMode, QueueName> = { live: 'delivery', test: 'simulation' };

/**
 * A lane: one mode and stream, claimed from its own index range with its own room in the
 * engine, so a bulk backlog never stands in front of transactional mail (stream isolation).
 */
export interface Lane {
  mode: KeyMode;
  stream: Stream;
}
export const LANES: Lane[] = [
  { mode: 'live', stream: 'transactional' },
  { mode: 'live', stream: 'bulk' },
  { mode: 'test', stream: 'transactional' },
  { mode: 'test', stream: 'bulk' },
];

/** What an operator filters a run by (Temporal search attributes) and reads on it: its rows are all of one lane. */
export function labelsOf(lane: Lane, rows: { organization_id: string; kind: string | null; subject?: string }[]): RunLabels {
  const kinds = rows.map((r) => r.kind).filter((k): k is string => !!k);
  return {
    organizations: rows.map((r) => r.organization_id),
    mode: lane.mode,
    stream: lane.stream,
    kinds,
    summary: summaryOf(lane, rows, [...new Set(kinds)]),
  };
}

/** The UI's summary line stays short: its list column shows about this much. */
const SUMMARY_BYTES = 200;

/** `3 live bulk messages (newsletter) · organization <id> · “Subject”` (more: `· 2 organizations`, `· 3 subjects`). */
function summaryOf(lane: Lane, rows: { organization_id: string; subject?: string }[], kinds: string[]): string {
  const n = rows.length;
  const orgs = [...new Set(rows.map((r) => r.organization_id))];
  const subjects = [...new Set(rows.map((r) => r.subject).filter((s): s is string => s !== undefined))];
  const parts = [
    `${n} ${lane.mode} ${lane.stream} message${n === 1 ? '' : 's'}${kinds.length ? ` (${kinds.slice(0, 3).join(', ')})` : ''}`,
    orgs.length === 1 ? `organization ${orgs[0]}` : `${orgs.length} organizations`,
    ...(subjects.length === 1 ? [`“${subjects[0].replace(/\s+/g, ' ')}”`] : subjects.length > 1 ? [`${subjects.length} subjects`] : []),
  ];
  return clip(parts.join(' · '), SUMMARY_BYTES);
}

/** At most `bytes` of UTF-8, cut at a character, with an ellipsis where it was cut. */
function clip(s: string, bytes: number): string {
  if (Buffer.byteLength(s) <= bytes) return s;
  let out = '';
  for (const ch of s) {
    if (Buffer.byteLength(out + ch + '…') > bytes) break;
    out += ch;
  }
  return out + '…';
}

/** A chunk's rows as runs of up to `perRun` messages, in order. */
export function runsOf(rows: OutboxRow[], perRun: number): OutboxRow[][] {
  const runs: OutboxRow[][] = [];
  for (let i = 0; i < rows.length; i += perRun) runs.push(rows.slice(i, i + perRun));
  return runs;
}

/** What the runs the outbox starts are given (OutboxOptions). */
export interface RunSettings {
  confirmationWindowMs?: number;
  retryBaseSeconds?: number;
}

/**
 * One run for `rows` (one lane); answers its workflow id. A batch's workflow id is derived from its members, so the
 * same chunk started again after a crash is a no-op; a chunk grouped differently is a second
 * run, and the claim in the database gives each message to one of them.
 */
export async function startRun(engine: Engine, log: Logger, settings: RunSettings, rows: OutboxRow[]): Promise<string> {
  const { mode, stream } = rows[0];
  const opts: StartOptions = { queue: QUEUE_OF[mode], stream, labels: labelsOf({ mode, stream }, rows) };
  const window = settings.confirmationWindowMs ?? 0;
  // A deferred message's SendEmail run has ended (at `queued`): its retry goes in a batch run.
  if (window > 0 && rows[0].deferrals === 0) {
    const input: SendEmailInput = { emailId: rows[0].id, confirmationWindowMs: window };
    try {
      // A scheduled message's run may be waiting for its admission (handBack): this start tells it.
      await engine.start(sendEmail, rows[0].id, input, engine.waitsScheduled ? { ...opts, signal: ADMITTED_SIGNAL } : opts);
      return rows[0].id;
    } catch (err) {
      // Its timer run ended at the hand-back (started before a window was configured): no run
      // under its id can deliver it any more, so a batch of one does.
      if (!(err instanceof RunEndedError) || rows[0].status !== 'queued') throw err;
      log.warn({ emailId: rows[0].id }, 'handed-back message whose run has ended: delivered by a batch run');
    }
  }
  const ids = rows.map((r) => r.id);
  // A retry (deferrals > 0) is named apart from the run that deferred it, which has ended.
  const members = rows.map((r) => (r.deferrals > 0 ? `${r.id}:${r.deferrals}` : r.id));
  const batchId = `send-batch-${createHash('sha256').update(members.join(',')).digest('hex').slice(0, 32)}`;
  const input: SendBatchInput = { batchId, emailIds: ids, retryBaseSeconds: settings.retryBaseSeconds ?? 30 };
  await engine.start(sendBatch, batchId, input, opts);
  return batchId;
}

/**
 * The SendEmail run of a message scheduled beyond the lead, which waits on the engine's durable
 * timer (SendEmailInput.handBack) and then hands the message back to the outbox.
 */
export async function startTimerRun(
  engine: Engine,
  settings: RunSettings,
  lane: Lane,
  row: { id: string; organization_id: string; kind: string | null },
): Promise<void> {
  const input: SendEmailInput = { emailId: row.id, handBack: true, confirmationWindowMs: settings.confirmationWindowMs ?? 0 };
  await engine.start(sendEmail, row.id, input, {
    queue: QUEUE_OF[lane.mode],
    stream: lane.stream,
    labels: labelsOf(lane, [row]),
    background: true,
  });
}
