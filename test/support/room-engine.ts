import assert from 'node:assert/strict';
import type { KeyMode, Stream } from '../../db/entities';
import type { Engine, RunLabels, StartOptions } from '../../worker/engine';
import type { QueueName, StartableDef } from '../../workflows/definition';
import { SEND_EMAIL_WORKFLOW } from '../../workflows/send-email';
import { SEND_BATCH_WORKFLOW, type SendBatchInput } from '../../workflows/send-batch';

const MODE_OF: Record<QueueName, KeyMode> = { delivery: 'live', simulation: 'test' };
type LaneKey = `${KeyMode}:${Stream}`;

/**
 * An engine whose queues have the room the test gives them (per mode and stream, in runs),
 * recording what it was asked to start: each message, and each run's messages.
 */
export class RoomEngine implements Engine {
  readonly name = 'room';
  /** As the embedded engine by default; the scheduled-timer tests turn it on, as Temporal has it. */
  waitsScheduled = false;
  /** SendEmail runs started ahead of their message's time (input handBack), by email id. */
  timers: string[] = [];
  rooms: Partial<Record<LaneKey, number>> | null = {};
  started: { emailId: string; mode: KeyMode; stream: Stream }[] = [];
  runs: string[][] = [];
  /** Each run's labels (StartOptions.labels), in the order of `runs`. */
  labels: (RunLabels | undefined)[] = [];
  async room(queue: QueueName, stream: Stream = 'transactional') {
    return this.rooms ? (this.rooms[`${MODE_OF[queue]}:${stream}`] ?? 0) : null;
  }
  async start<I>(def: StartableDef<I>, workflowId: string, input: I, opts: StartOptions = {}) {
    let ids: string[];
    if (def.name === SEND_EMAIL_WORKFLOW && (input as { handBack?: boolean }).handBack) {
      assert.equal((input as { emailId: string }).emailId, workflowId);
      this.timers.push(workflowId);
      return;
    }
    if (def.name === SEND_EMAIL_WORKFLOW) {
      assert.deepEqual(input, { emailId: workflowId });
      ids = [workflowId];
    } else {
      assert.equal(def.name, SEND_BATCH_WORKFLOW);
      const batch = input as SendBatchInput;
      assert.equal(batch.batchId, workflowId);
      ids = batch.emailIds;
    }
    const mode = MODE_OF[opts.queue ?? 'delivery'];
    const stream = opts.stream ?? 'transactional';
    for (const emailId of ids) this.started.push({ emailId, mode, stream });
    this.runs.push(ids);
    this.labels.push(opts.labels);
    if (this.rooms) this.rooms[`${mode}:${stream}`] = (this.rooms[`${mode}:${stream}`] ?? 0) - 1;
  }
  async signal() {}
  ready = () => true;
  async stop() {}
}
