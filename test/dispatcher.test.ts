import assert from 'node:assert/strict';
import pino from 'pino';
import { openOrm, migrate, type Orm } from '../db/orm';
import { Email, type KeyMode } from '../db/entities';
import { createDomain, createKey, createOrganization } from '../server/provisioning';
import { acceptEmails } from '../api/emails/accept';
import { GroupStore } from '../api/emails/group-store';
import { prepareEmail } from '../api/emails/prepare';
import { ApiError } from '../api/errors';
import { hashToken } from '../api/middleware/auth';
import { Dispatcher } from '../worker/dispatcher';
import type { Engine, SendEmailJob } from '../worker/engine';
import { newDatabase } from './support/pg';

/** An engine whose queues have the room the test gives them, recording what it was asked to start. */
class RoomEngine implements Engine {
  readonly name = 'room';
  room: Record<KeyMode, number> | null = { live: 0, test: 0 };
  started: SendEmailJob[] = [];
  async sendEmailRoom() {
    return this.room;
  }
  async startSendEmail(job: SendEmailJob) {
    this.started.push(job);
    if (this.room) this.room[job.mode] -= job.notBeforeMs !== null && job.notBeforeMs > Date.now() ? 0 : 1;
  }
  async signalCancel() {}
  async startDomainVerification() {}
  ready = () => true;
  async stop() {}
}

describe('Dispatcher: the outbox holds the backlog and starts workflows as the engine has room', function () {
  this.timeout(60_000);
  let orm: Orm;
  let engine: RoomEngine;
  let dispatcher: Dispatcher;
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
    dispatcher = new Dispatcher(orm, engine, pino({ level: 'silent' }));
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
        { cost: 1, batch: false },
      );
      assert.ok(!(r instanceof ApiError), String(r));
      ids.push(r.id);
    }
    return ids;
  }
  const unstarted = async () =>
    (await orm.em.fork().find(Email, { enqueuedAt: null }, { orderBy: { createdAt: 'asc', id: 'asc' } })).map((e) => e.id);

  it('starts due messages only up to the room of their mode, oldest first; the rest wait in the outbox', async () => {
    const live = await store('live', 5);
    const test = await store('test', 2);
    engine.room = { live: 3, test: 0 };
    const pass = await dispatcher.runOnce();
    assert.deepEqual(
      engine.started.map((j) => j.emailId),
      live.slice(0, 3),
    );
    assert.equal(pass.full, true, 'a queue is full while mail waits: look again soon');
    assert.deepEqual(await unstarted(), [...live.slice(3), ...test]);

    engine.room = { live: 10, test: 10 };
    const next = await dispatcher.runOnce();
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
    engine.room = { live: 0, test: 0 };
    await dispatcher.runOnce();
    assert.deepEqual(
      engine.started.map((j) => [j.emailId, j.notBeforeMs]),
      later.map((id) => [id, at.getTime()]),
    );
    assert.deepEqual(await unstarted(), now);
  });

  it('without a room limit (Temporal), starts everything', async () => {
    const ids = [...(await store('live', 3)), ...(await store('test', 2))];
    engine.room = null;
    await dispatcher.runOnce();
    assert.deepEqual(engine.started.map((j) => j.emailId).sort(), [...ids].sort());
    assert.deepEqual(await unstarted(), []);
  });

  it('leaves a message whose start failed in the outbox, for the next pass', async () => {
    const [id] = await store('live', 1);
    engine.room = { live: 5, test: 5 };
    const start = engine.startSendEmail.bind(engine);
    engine.startSendEmail = async () => {
      throw new Error('engine unavailable');
    };
    await dispatcher.runOnce();
    assert.deepEqual(await unstarted(), [id]);
    engine.startSendEmail = start;
    await dispatcher.runOnce();
    assert.deepEqual(
      engine.started.map((j) => j.emailId),
      [id],
    );
    assert.deepEqual(await unstarted(), []);
  });
});
