import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { takeOverDeadWorkers } from '../../db/sql/take-over-dead-workers';
import { insertWorker, openTestDb, sql, unique } from '../support/db-fixtures';
import { installDbosSchema, releasedTogether, values } from '../support/db-fixtures-rz';

const QUEUE = '_dbos_internal_queue';
const APP = 'svc';

describe('db/sql/take-over-dead-workers: the work of dead processes back on their queues', function () {
  let orm: Orm;
  const ago = (s: number) => new Date(Date.now() - s * 1000);

  before(async () => {
    orm = await openTestDb('db_take_over');
    await installDbosSchema(orm);
  });
  after(async () => orm.close());
  beforeEach(async () => {
    await sql(orm, 'delete from workers');
  });

  async function workflow(executorId: string, over: { status?: string; app?: string | null; queue?: string | null } = {}): Promise<string> {
    const id = unique('wf');
    await sql(
      orm,
      `insert into dbos.workflow_status (workflow_uuid, status, name, executor_id, application_name, queue_name, started_at_epoch_ms, owner_xid)
       values ($1, $2, 'w', $3, $4, $5, 123, 'xid')`,
      [id, over.status ?? 'PENDING', executorId, over.app === undefined ? APP : over.app, over.queue === undefined ? null : over.queue],
    );
    return id;
  }
  const status = async (id: string) =>
    (
      await sql(orm, `select status, queue_name, started_at_epoch_ms, owner_xid from dbos.workflow_status where workflow_uuid = $1`, [id])
    )[0];
  const exists = async (id: string) => (await sql(orm, 'select 1 from workers where id = $1', [id])).length === 1;

  it('removes only rows whose heartbeat is older than the span, never the caller’s own, and answers their ids', async () => {
    const dead = unique('dead');
    const alive = unique('alive');
    const self = unique('self');
    await insertWorker(orm, dead, { heartbeat_at: ago(120) });
    await insertWorker(orm, alive, { heartbeat_at: ago(5) });
    await insertWorker(orm, self, { heartbeat_at: ago(120) });
    const r = await takeOverDeadWorkers(orm, 60, self, QUEUE, APP);
    assert.deepEqual(r.dead, [dead]);
    assert.equal(await exists(dead), false);
    assert.equal(await exists(alive), true);
    assert.equal(await exists(self), true, 'a process never takes itself over');
  });

  it('re-enqueues the PENDING workflows of the dead executors (queue kept, or the internal one), of this application or none', async () => {
    const dead = unique('dead');
    const alive = unique('alive');
    await insertWorker(orm, dead, { heartbeat_at: ago(120) });
    await insertWorker(orm, alive, { heartbeat_at: ago(1) });
    const queued = await workflow(dead, { queue: 'delivery' });
    const unqueued = await workflow(dead, { queue: null });
    const noApp = await workflow(dead, { app: null });
    const otherApp = await workflow(dead, { app: 'another-app' });
    const finished = await workflow(dead, { status: 'SUCCESS' });
    const ofAlive = await workflow(alive);
    const r = await takeOverDeadWorkers(orm, 60, unique('self'), QUEUE, APP);
    assert.deepEqual(r.dead, [dead]);
    assert.equal(r.workflows, 3);
    assert.deepEqual(await status(queued), { status: 'ENQUEUED', queue_name: 'delivery', started_at_epoch_ms: null, owner_xid: null });
    assert.deepEqual(await status(unqueued), { status: 'ENQUEUED', queue_name: QUEUE, started_at_epoch_ms: null, owner_xid: null });
    assert.equal((await status(noApp)).status, 'ENQUEUED');
    assert.equal((await status(otherApp)).status, 'PENDING', 'another application’s workflow is not ours to move');
    assert.equal((await status(finished)).status, 'SUCCESS');
    assert.equal((await status(ofAlive)).status, 'PENDING', 'a live executor keeps its workflows');
  });

  it('answers nothing when no row is stale', async () => {
    await insertWorker(orm, unique('alive'), { heartbeat_at: ago(1) });
    assert.deepEqual(await takeOverDeadWorkers(orm, 60, unique('self'), QUEUE, APP), { dead: [], workflows: 0 });
  });

  /**
   * The race: every live process runs the take-over. Released together behind a lock on the dead
   * rows, each dead row is deleted by exactly one of them, and its workflows re-enqueued once.
   */
  it('race: concurrent take-overs each claim a dead row once, and its workflows are counted once', async () => {
    const dead = [unique('dead'), unique('dead'), unique('dead')];
    for (const id of dead) await insertWorker(orm, id, { heartbeat_at: ago(300) });
    const flows = [];
    for (const id of dead) flows.push(await workflow(id), await workflow(id));
    const results = values(
      await releasedTogether(
        orm,
        [[`select 1 from workers where id = any($1) for update`, [dead]]],
        Array.from({ length: 4 }, (_, i) => () => takeOverDeadWorkers(orm, 60, `self-${i}`, QUEUE, APP)),
      ),
    );
    const claimed = results.flatMap((r) => r.dead).sort();
    assert.deepEqual(claimed, [...dead].sort(), 'each dead row claimed by exactly one process');
    assert.equal(
      results.reduce((n, r) => n + r.workflows, 0),
      flows.length,
      'each workflow re-enqueued once',
    );
    for (const id of flows) assert.equal((await status(id)).status, 'ENQUEUED');
  });
});
