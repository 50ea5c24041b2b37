import assert from 'node:assert/strict';
import pino from 'pino';
import { openOrm, migrate, type Orm } from '../../db/orm';
import { Email, type KeyMode } from '../../db/entities';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { acceptEmails } from '../../core/emails/accept';
import { GroupStore } from '../../core/emails/group-store';
import { prepareEmail } from '../../core/emails/prepare';
import { ServiceError } from '../../core/errors';
import { hashToken } from '../../core/tokens';
import { Outbox } from '../../worker/outbox';
import type { Engine, StartOptions } from '../../worker/engine';
import type { QueueName, StartableDef } from '../../workflows/definition';
import { SEND_EMAIL_WORKFLOW } from '../../workflows/send-email';
import { newDatabase } from '../support/pg';

const MODE_OF: Record<QueueName, KeyMode> = { delivery: 'live', simulation: 'test' };

/** An engine whose queues have the room the test gives them (per mode), recording what it was asked to start. */
class RoomEngine implements Engine {
  readonly name = 'room';
  rooms: Record<KeyMode, number> | null = { live: 0, test: 0 };
  started: { emailId: string; mode: KeyMode; notBeforeMs: number | null }[] = [];
  async room(queue: QueueName) {
    return this.rooms ? this.rooms[MODE_OF[queue]] : null;
  }
  async start<I>(def: StartableDef<I>, workflowId: string, input: I, opts: StartOptions = {}) {
    assert.equal(def.name, SEND_EMAIL_WORKFLOW);
    assert.deepEqual(input, { emailId: workflowId });
    const mode = MODE_OF[opts.queue ?? 'delivery'];
    const notBeforeMs = opts.notBeforeMs ?? null;
    this.started.push({ emailId: workflowId, mode, notBeforeMs });
    if (this.rooms) this.rooms[mode] -= notBeforeMs !== null && notBeforeMs > Date.now() ? 0 : 1;
  }
  async signal() {}
  ready = () => true;
  async stop() {}
}

describe('Outbox: it holds the backlog and starts workflows as the engine has room', function () {
  this.timeout(60_000);
  let orm: Orm;
  let engine: RoomEngine;
  let outbox: Outbox;
  const keys: Record<KeyMode, string> = { live: '', test: '' };

  before(async () => {
    orm = await openOrm(await newDatabase('svc_dispatch'));
    await migrate(orm);
    const org = await createOrganization(orm, 'Outbox');
    await createDomain(orm, org.id, 'outbox.example.test', { verified: true });
    for (const mode of ['live', 'test'] as const) {
      keys[mode] = hashToken((await createKey(orm, org.id, { name: mode, permission: 'send', mode, rateLimit: 1000 })).token);
    }
  });
  after(async () => orm.close());
  beforeEach(async () => {
    // Each test starts from an empty outbox.
    await orm.em.fork().nativeUpdate(Email, { enqueuedAt: null }, { enqueuedAt: new Date() });
    engine = new RoomEngine();
    outbox = new Outbox(orm, engine, pino({ level: 'silent' }));
  });

  async function store(mode: KeyMode, n: number, extra: object = {}): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const prepared = prepareEmail(
        { from: 'app@outbox.example.test', to: `r${i}@example.com`, subject: 's', text: 't', ...extra },
        { inBatch: false, now: new Date() },
      );
      const [r] = await acceptEmails(
        { orm, dispatch: () => undefined, store: new GroupStore(orm, pino({ level: 'silent' })) },
        { tokenHash: keys[mode] },
        [prepared],
        { cost: 1 },
      );
      if (r instanceof ServiceError || typeof r === 'symbol') assert.fail(String(r));
      ids.push(r.id);
    }
    return ids;
  }
  const unstarted = async () =>
    (await orm.em.fork().find(Email, { enqueuedAt: null }, { orderBy: { createdAt: 'asc', id: 'asc' } })).map((e) => e.id);

  it('starts due messages only up to the room of their mode, oldest first; the rest wait in the outbox', async () => {
    const live = await store('live', 5);
    const test = await store('test', 2);
    engine.rooms = { live: 3, test: 0 };
    const pass = await outbox.runOnce();
    assert.deepEqual(
      engine.started.map((j) => j.emailId),
      live.slice(0, 3),
    );
    assert.equal(pass.full, true, 'a queue is full while mail waits: look again soon');
    assert.deepEqual(await unstarted(), [...live.slice(3), ...test]);

    engine.rooms = { live: 10, test: 10 };
    const next = await outbox.runOnce();
    assert.deepEqual(
      engine.started.map((j) => j.emailId),
      [...live, ...test],
    );
    assert.deepEqual(
      engine.started.map((j) => j.mode),
      ['live', 'live', 'live', 'live', 'live', 'test', 'test'],
    );
    assert.equal(next.full, false);
    assert.deepEqual(await unstarted(), []);
  });

  it('starts messages scheduled for later at once, whatever the room: the engine holds them as delayed starts', async () => {
    const at = new Date(Date.now() + 3_600_000);
    const later = await store('live', 2, { scheduled_at: at.toISOString() });
    const now = await store('live', 1);
    engine.rooms = { live: 0, test: 0 };
    await outbox.runOnce();
    assert.deepEqual(
      engine.started.map((j) => [j.emailId, j.notBeforeMs]),
      later.map((id) => [id, at.getTime()]),
    );
    assert.deepEqual(await unstarted(), now);
  });

  it('without a room limit (Temporal), starts everything', async () => {
    const ids = [...(await store('live', 3)), ...(await store('test', 2))];
    engine.rooms = null;
    await outbox.runOnce();
    assert.deepEqual(engine.started.map((j) => j.emailId).sort(), [...ids].sort());
    assert.deepEqual(await unstarted(), []);
  });

  it('leaves a message whose start failed in the outbox, for the next pass', async () => {
    const [id] = await store('live', 1);
    engine.rooms = { live: 5, test: 5 };
    const start = engine.start.bind(engine);
    engine.start = async () => {
      throw new Error('engine unavailable');
    };
    await outbox.runOnce();
    assert.deepEqual(await unstarted(), [id]);
    engine.start = start;
    await outbox.runOnce();
    assert.deepEqual(
      engine.started.map((j) => j.emailId),
      [id],
    );
    assert.deepEqual(await unstarted(), []);
  });
});
