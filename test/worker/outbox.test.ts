import assert from 'node:assert/strict';
import pino from 'pino';
import { openOrm, migrate, type Orm } from '../../db/orm';
import { Email, type KeyMode } from '../../db/entities';
import type { Clock } from '../../core/clock';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { acceptEmails } from '../../core/emails/accept';
import { GroupStore } from '../../core/emails/group-store';
import { prepareEmail } from '../../core/emails/prepare';
import { ServiceError } from '../../core/errors';
import { hashToken } from '../../core/tokens';
import { MESSAGES_PER_RUN, Outbox } from '../../worker/outbox';
import { handBackScheduled } from '../../db/sql/scheduled-timers';
import { RunEndedError, type Engine } from '../../worker/engine';
import { sendBatch, type SendBatchInput } from '../../workflows/send-batch';
import { newDatabase } from '../support/pg';
import { RoomEngine } from '../support/room-engine';

describe('Outbox: it holds the backlog and starts workflows as the engine has room', function () {
  this.timeout(60_000);
  let orm: Orm;
  let engine: RoomEngine;
  let outbox: Outbox;
  const keys: Record<KeyMode, string> = { live: '', test: '' };
  let orgId: string;

  /** The outbox's clock, running from now: tests move it ahead to make scheduled mail due. */
  let clock: { aheadMs: number } & Clock;

  before(async () => {
    orm = await openOrm(await newDatabase('svc_dispatch'));
    await migrate(orm);
    const org = await createOrganization(orm, 'Outbox');
    orgId = org.id;
    await createDomain(orm, org.id, 'outbox.example.test', { verified: true });
    await createDomain(orm, org.id, 'bulk.outbox.example.test', { verified: true, stream: 'bulk' });
    for (const mode of ['live', 'test'] as const) {
      keys[mode] = hashToken((await createKey(orm, org.id, { name: mode, permission: 'send', mode, rateLimit: 1000 })).token);
    }
  });
  after(async () => orm.close());
  beforeEach(async () => {
    // Each test starts from an empty outbox.
    await orm.em.fork().nativeUpdate(Email, { enqueuedAt: null }, { enqueuedAt: new Date() });
    engine = new RoomEngine();
    clock = {
      aheadMs: 0,
      now() {
        return new Date(Date.now() + this.aheadMs);
      },
    };
    // One message per run: these tests count room in messages.
    outbox = new Outbox(orm, engine, pino({ level: 'silent' }), { clock, messagesPerRun: 1 });
  });

  async function store(mode: KeyMode, n: number, extra: object = {}, tokenHash = keys[mode]): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const prepared = prepareEmail(
        { from: 'app@outbox.example.test', to: `r${i}@example.com`, subject: 's', text: 't', ...extra },
        { inBatch: false, now: new Date() },
      );
      const [r] = await acceptEmails(
        { orm, dispatch: () => undefined, store: new GroupStore(orm, pino({ level: 'silent' })) },
        { tokenHash },
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

  it('starts due messages only up to the room of their lane, oldest first; the rest wait in the outbox', async () => {
    const live = await store('live', 5);
    const test = await store('test', 2);
    engine.rooms = { 'live:transactional': 3 };
    const pass = await outbox.runOnce();
    assert.deepEqual(
      engine.started.map((j) => j.emailId),
      live.slice(0, 3),
    );
    assert.equal(pass.full, true, 'a queue is full while mail waits: look again soon');
    assert.deepEqual(await unstarted(), [...live.slice(3), ...test]);

    engine.rooms = { 'live:transactional': 10, 'test:transactional': 10 };
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

  it('a bulk backlog waits in its own lane: transactional mail accepted after it starts at once', async () => {
    const bulk = await store('live', 30, { from: 'news@bulk.outbox.example.test' });
    const tx = await store('live', 1);
    engine.rooms = { 'live:transactional': 5, 'live:bulk': 4 };
    await outbox.runOnce();
    assert.deepEqual(
      engine.started.map((j) => [j.emailId, j.stream]),
      [...tx.map((id) => [id, 'transactional']), ...bulk.slice(0, 4).map((id) => [id, 'bulk'])],
    );
    assert.deepEqual(await unstarted(), bulk.slice(4));
  });

  it('keeps mail scheduled for later in the outbox (no engine timer) and starts it once due', async () => {
    const at = new Date(Date.now() + 3_600_000);
    const later = await store('live', 2, { scheduled_at: at.toISOString() });
    const now = await store('live', 1);
    engine.rooms = { 'live:transactional': 10 };
    await outbox.runOnce();
    assert.deepEqual(
      engine.started.map((j) => j.emailId),
      now,
    );
    assert.deepEqual(await unstarted(), later);
    clock.aheadMs = 3_600_000 + 1000;
    await outbox.runOnce();
    assert.deepEqual(
      engine.started.map((j) => j.emailId),
      [...now, ...later],
    );
  });

  it('without a room limit (Temporal), starts everything due', async () => {
    const ids = [...(await store('live', 3)), ...(await store('test', 2))];
    engine.rooms = null;
    await outbox.runOnce();
    assert.deepEqual(engine.started.map((j) => j.emailId).sort(), [...ids].sort());
    assert.deepEqual(await unstarted(), []);
  });

  it('leaves a message whose start failed in the outbox, for the next pass', async () => {
    const [id] = await store('live', 1);
    engine.rooms = { 'live:transactional': 5 };
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

  it('starts a backlog as SendBatch runs of up to MESSAGES_PER_RUN messages, as many runs as the lane has room for', async () => {
    const ids = await store('live', 2 * MESSAGES_PER_RUN + 7);
    engine.rooms = { 'live:transactional': 2 };
    outbox = new Outbox(orm, engine, pino({ level: 'silent' }), { clock });
    const pass = await outbox.runOnce();
    assert.deepEqual(
      engine.runs.map((r) => r.length),
      [MESSAGES_PER_RUN, MESSAGES_PER_RUN],
    );
    assert.deepEqual(engine.runs.flat(), ids.slice(0, 2 * MESSAGES_PER_RUN), 'oldest first, each once');
    assert.equal(pass.full, true);
    assert.deepEqual(await unstarted(), ids.slice(2 * MESSAGES_PER_RUN));
  });

  it('labels each run with its organizations, mode, stream and kinds (Temporal search attributes)', async () => {
    const other = await createOrganization(orm, 'Outbox labels');
    await createDomain(orm, other.id, 'labels.outbox.example.test', { verified: true });
    const otherKey = hashToken((await createKey(orm, other.id, { name: 'live', permission: 'send', mode: 'live', rateLimit: 1000 })).token);
    const mine = (await store('live', 2, { kind: 'receipt' })).concat(await store('live', 1));
    const theirs = await store('live', 1, { from: 'app@labels.outbox.example.test', kind: 'alert' }, otherKey);
    const test = await store('test', 1, { kind: 'receipt' });
    engine.rooms = null;
    outbox = new Outbox(orm, engine, pino({ level: 'silent' }), { clock });
    await outbox.runOnce();
    const labelsOf = (id: string) => engine.labels[engine.runs.findIndex((r) => r.includes(id))]!;
    const live = labelsOf(mine[0]);
    assert.deepEqual(engine.runs[engine.labels.indexOf(live)], [...mine, ...theirs], 'one run of the live lane');
    assert.deepEqual(new Set(live.organizations), new Set([orgId, other.id]));
    assert.equal(live.mode, 'live');
    assert.equal(live.stream, 'transactional');
    assert.deepEqual(new Set(live.kinds), new Set(['receipt', 'alert']));
    // What the Temporal UI shows on the run: how many, which lane, whose, about what.
    assert.equal(live.summary, '4 live transactional messages (receipt, alert) · 2 organizations · “s”');
    assert.deepEqual(labelsOf(test[0]), {
      organizations: [orgId],
      mode: 'test',
      stream: 'transactional',
      kinds: ['receipt'],
      summary: `1 test transactional message (receipt) · organization ${orgId} · “s”`,
    });
  });

  it('takes live starts from the platform send rate in SQL: a window admits its share, the rest waits for the next', async () => {
    // 8 a second: windows of 2 every 250 ms, shared by every outbox on the database.
    const ids = await store('live', 6);
    const test = await store('test', 3);
    engine.rooms = null;
    const outboxes = [0, 1].map(() => new Outbox(orm, engine, pino({ level: 'silent' }), { clock, sendRatePerSecond: 8 }));
    // Both in the same window: only its 2 go, whichever outbox takes them; test mail is not rated.
    const window = 250;
    await new Promise((r) => setTimeout(r, window - (Date.now() % window) + 5));
    const passes = await Promise.all(outboxes.map((o) => o.runOnce()));
    const live = engine.started.filter((s) => s.mode === 'live').map((s) => s.emailId);
    assert.deepEqual(live, ids.slice(0, 2));
    assert.deepEqual(
      engine.started.filter((s) => s.mode === 'test').map((s) => s.emailId),
      test,
    );
    assert.ok(
      passes.some((p) => p.full),
      'a pass that was throttled looks again soon',
    );
    for (let i = 0; i < 20 && (await unstarted()).length > 0; i++) {
      await new Promise((r) => setTimeout(r, window));
      await outboxes[i % 2].runOnce();
    }
    assert.deepEqual(
      engine.started.filter((s) => s.mode === 'live').map((s) => s.emailId),
      ids,
    );
  });

  it('on an engine that waits on scheduled mail: a timer run for mail beyond the lead at once, taken back when due', async () => {
    engine.waitsScheduled = true;
    engine.rooms = null;
    const [later] = await store('live', 1, { scheduled_at: new Date(Date.now() + 2 * 3_600_000).toISOString() });
    const [soon] = await store('live', 1, { scheduled_at: new Date(Date.now() + 10_000).toISOString() });
    const [now] = await store('live', 1);
    await outbox.runOnce();
    assert.deepEqual(engine.timers, [later], 'a timer run for the message two hours ahead, none within the lead');
    assert.deepEqual(
      engine.started.map((r) => r.emailId),
      [now],
      'nothing else delivered before its time',
    );
    assert.deepEqual(await unstarted(), [soon], 'the timer run took its message out of the outbox');
    // A second pass, the run already there: no second timer.
    clock.aheadMs = 1000;
    await outbox.runOnce();
    assert.deepEqual(engine.timers, [later]);

    // The timer fired: the run hands the message back, and the outbox starts its delivery when due.
    assert.equal(await handBackScheduled(orm.em.fork(), later), 'queued');
    // Handed back while this clock still sees it ahead (the server's clock ahead of ours, a stray
    // cancel signal): it waits here until due, and never gets a second timer run (its run has ended).
    clock.aheadMs = 3000;
    await outbox.runOnce();
    assert.deepEqual(engine.timers, [later]);
    assert.deepEqual((await unstarted()).sort(), [soon, later].sort(), 'both wait here: neither is due');
    clock.aheadMs = 2 * 3_600_000 + 1000;
    await outbox.runOnce();
    assert.deepEqual(engine.started.map((r) => r.emailId).sort(), [now, soon, later].sort());
    assert.deepEqual(engine.timers, [later]);
    assert.deepEqual(await unstarted(), []);
    // A canceled message is not handed back: its status is the answer.
    const [gone] = await store('live', 1, { scheduled_at: new Date(Date.now() + 3 * 3_600_000).toISOString() });
    await orm.em.fork().nativeUpdate(Email, { id: gone }, { status: 'canceled' });
    assert.equal(await handBackScheduled(orm.em.fork(), gone), 'canceled');
  });

  it('on the embedded engine scheduled mail waits as a row until due: no timer runs', async () => {
    engine.rooms = null;
    const [later] = await store('live', 1, { scheduled_at: new Date(Date.now() + 2 * 3_600_000).toISOString() });
    await outbox.runOnce();
    assert.deepEqual(engine.timers, []);
    assert.ok((await unstarted()).includes(later));
  });

  it('with a confirmation window, a handed-back message whose run has ended is delivered by a batch of one', async () => {
    const batches: string[][] = [];
    const ended: Engine = {
      name: 'ended',
      waitsScheduled: true,
      async start(def, workflowId, input, opts = {}) {
        if (opts.signal) throw new RunEndedError(workflowId);
        if (def.name === sendBatch.name) batches.push((input as unknown as SendBatchInput).emailIds);
      },
      signal: async () => undefined,
      room: async () => null,
      ready: () => true,
      stop: async () => undefined,
    };
    const windowed = new Outbox(orm, ended, pino({ level: 'silent' }), { clock, confirmationWindowMs: 3_600_000 });
    const [id] = await store('live', 1);
    await windowed.runOnce();
    assert.deepEqual(batches, [[id]]);
    assert.deepEqual(await unstarted(), []);
  });
});
