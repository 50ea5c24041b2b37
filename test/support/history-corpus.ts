import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import type { temporal } from '@temporalio/proto';

/** Where the corpus lives: one folder per release it was recorded from, every file replayed in CI. */
export const CORPUS_DIR = path.join(__dirname, '..', 'fixtures', 'temporal-histories');

/**
 * With RECORD_HISTORIES set (a folder, `npm run record-histories`), keeps the history of each
 * ended run a live suite looks at, one file per path a workflow took: the file name carries a hash
 * of the run's shape (event types, activities, signals, timers), so the same path seen twice is
 * kept once. test/workflows/temporal-replay.test.ts replays every file with today's bundle: a body
 * changed without a version patch fails CI on the first history it no longer fits.
 */
export function recordHistory(history: temporal.api.history.v1.IHistory, type: string, status: string): void {
  const dir = process.env.RECORD_HISTORIES;
  if (!dir || status === 'RUNNING') return;
  const shape = (history.events ?? []).map((e) =>
    [
      e.eventType,
      e.activityTaskScheduledEventAttributes?.activityType?.name,
      e.workflowExecutionSignaledEventAttributes?.signalName,
      e.markerRecordedEventAttributes?.markerName,
    ]
      .filter((x) => x !== undefined && x !== null)
      .join(':'),
  );
  const hash = createHash('sha256').update(shape.join('\n')).digest('hex').slice(0, 12);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${type}-${status.toLowerCase()}-${hash}.json`);
  if (!fs.existsSync(file)) fs.writeFileSync(file, historyToJSON(history as never));
}

/** Every recorded history in the corpus, by its path under CORPUS_DIR. */
export function corpusFiles(dir = CORPUS_DIR): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((d) => (d.isDirectory() ? corpusFiles(path.join(dir, d.name)) : d.name.endsWith('.json') ? [path.join(dir, d.name)] : []))
    .sort();
}
