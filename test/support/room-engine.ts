import assert from 'node:assert/strict';
import type { KeyMode, Stream } from '../../db/entities';
import type { Engine, StartOptions } from '../../worker/engine';
import type { QueueName, StartableDef } from '../../workflows/definition';
import { SEND_EMAIL_WORKFLOW } from '../../workflows/send-email';

const MODE_OF: Record<QueueName, KeyMode> = { delivery: 'live', simulation: 'test' };
type LaneKey = `${KeyMode}:${Stream}`;

/** An engine whose queues have the room the test gives them (per mode and stream), recording what it was asked to start. */
export class RoomEngine implements Engine {
  readonly name = 'room';
  rooms: Partial<Record<LaneKey, number>> | null = {};
  started: { emailId: string; mode: KeyMode; stream: Stream }[] = [];
  async room(queue: QueueName, stream: Stream = 'transactional') {
    return this.rooms ? (this.rooms[`${MODE_OF[queue]}:${stream}`] ?? 0) : null;
  }
  async start<I>(def: StartableDef<I>, workflowId: string, input: I, opts: StartOptions = {}) {
    assert.equal(def.name, SEND_EMAIL_WORKFLOW);
    assert.deepEqual(input, { emailId: workflowId });
    const mode = MODE_OF[opts.queue ?? 'delivery'];
    const stream = opts.stream ?? 'transactional';
    this.started.push({ emailId: workflowId, mode, stream });
    if (this.rooms) this.rooms[`${mode}:${stream}`] = (this.rooms[`${mode}:${stream}`] ?? 0) - 1;
  }
  async signal() {}
  ready = () => true;
  async stop() {}
}
