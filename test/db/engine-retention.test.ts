import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { deleteFinishedWorkflows } from '../../db/sql/engine-retention';
import { openTestDb, openTransaction, sql, unique } from '../support/db-fixtures';
import { installDbosSchema } from '../support/db-fixtures-rz';

const DAY_MS = 86_400_000;
const RETENTION_MS = 5 * DAY_MS;
const OLD_MS = 10 * DAY_MS;

/** The engine tables a workflow leaves rows in, and the column naming it. */
const TABLES: [string, string][] = [
  ['workflow_status', 'workflow_uuid'],
  ['operation_outputs', 'workflow_uuid'],
  ['workflow_input', 'workflow_uuid'],
  ['workflow_output', 'workflow_uuid'],
  ['notifications', 'destination_uuid'],
  ['workflow_events', 'workflow_uuid'],
  ['workflow_events_history', 'workflow_uuid'],
  ['streams', 'workflow_uuid'],
];

// The age is on the database's clock (as DBOS stamps completed_at): rows are dated relative to it.
describe('db/sql/engine-retention: finished engine workflows past the retention are deleted with all they left, each once', function () {
  let orm: Orm;

  before(async () => {
    orm = await openTestDb('db_engine_retention');
    await installDbosSchema(orm);
  });
  after(async () => orm.close());
  // The statement serves the whole engine: each test starts with no workflow.
  beforeEach(async () => {
    await sql(orm, 'delete from dbos.workflow_status');
    for (const [table] of TABLES.slice(1)) await sql(orm, `delete from dbos.${table}`);
  });

  /** A workflow's rows in every engine table, its status last changed `ageMs` ago. */
  async function insertWorkflow(status: string, ageMs: number): Promise<string> {
    const id = unique('wf-');
    const finished = ['SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED'].includes(status);
    await sql(
      orm,
      `insert into dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name, queue_name,
                                         created_at, updated_at, completed_at, delay_until_epoch_ms, recovery_attempts)
       values ($1, $2, 'T', 'test', 'test', 'test', $3,
               (extract(epoch from now()) * 1000)::bigint - $4 - 60000, (extract(epoch from now()) * 1000)::bigint - $4,
               case when $5 then (extract(epoch from now()) * 1000)::bigint - $4 end, $6, 1)`,
      [
        id,
        status,
        ['ENQUEUED', 'DELAYED'].includes(status) ? 'q' : null,
        ageMs,
        finished,
        status === 'DELAYED' ? Date.now() + DAY_MS : null,
      ],
    );
    await sql(orm, `insert into dbos.workflow_input (workflow_uuid, inputs) values ($1, '[]')`, [id]);
    for (const step of [0, 1])
      await sql(
        orm,
        `insert into dbos.operation_outputs (workflow_uuid, function_id, function_name, output, started_at_epoch_ms, completed_at_epoch_ms)
         values ($1, $2, 'step', '{}', 0, 0)`,
        [id, step],
      );
    await sql(orm, `insert into dbos.notifications (destination_uuid, topic, message) values ($1, 'wake', '{}')`, [id]);
    await sql(orm, `insert into dbos.workflow_events (workflow_uuid, key, value) values ($1, 'k', '1')`, [id]);
    await sql(orm, `insert into dbos.workflow_events_history (workflow_uuid, function_id, key, value) values ($1, 2, 'k', '1')`, [id]);
    await sql(orm, `insert into dbos.streams (workflow_uuid, key, value, "offset") values ($1, 'log', '"x"', 0)`, [id]);
    if (finished) await sql(orm, `insert into dbos.workflow_output (workflow_uuid, output) values ($1, '"done"')`, [id]);
    return id;
  }

  /** How many rows each id has left, over every engine table. */
  async function rowsLeft(ids: string[]): Promise<Record<string, number>> {
    const out: Record<string, number> = Object.fromEntries(ids.map((id) => [id, 0]));
    for (const [table, column] of TABLES)
      for (const r of await sql(orm, `select ${column} as id, count(*)::int as n from dbos.${table} where ${column} = any($1) group by 1`, [
        ids,
      ]))
        out[r.id] += r.n;
    return out;
  }

  it('deletes finished workflows older than the retention with every row they left; going, queued, delayed and recent ones stay', async () => {
    const doomed = [];
    for (const status of ['SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED'])
      doomed.push(await insertWorkflow(status, OLD_MS));
    const kept = [
      await insertWorkflow('PENDING', OLD_MS),
      await insertWorkflow('ENQUEUED', OLD_MS),
      await insertWorkflow('DELAYED', OLD_MS),
      await insertWorkflow('SUCCESS', DAY_MS),
      await insertWorkflow('ERROR', 0),
    ];
    const keptBefore = await rowsLeft(kept);
    assert.deepEqual(await deleteFinishedWorkflows(orm, RETENTION_MS, 100), { workflows: 4, steps: 8, inputs: 4, outputs: 4 });
    assert.deepEqual(Object.values(await rowsLeft(doomed)), [0, 0, 0, 0]);
    assert.deepEqual(await rowsLeft(kept), keptBefore);
    assert.deepEqual(await deleteFinishedWorkflows(orm, RETENTION_MS, 100), { workflows: 0, steps: 0, inputs: 0, outputs: 0 });
  });

  it('a page takes the oldest first, up to its limit', async () => {
    const oldest = await insertWorkflow('SUCCESS', OLD_MS + 2 * DAY_MS);
    const older = await insertWorkflow('SUCCESS', OLD_MS + DAY_MS);
    const old = await insertWorkflow('SUCCESS', OLD_MS);
    assert.equal((await deleteFinishedWorkflows(orm, RETENTION_MS, 2)).workflows, 2);
    const left = await rowsLeft([oldest, older, old]);
    assert.deepEqual([left[oldest], left[older]], [0, 0]);
    assert.ok(left[old] > 0);
  });

  it('race: a finished workflow being resumed by another transaction is skipped, not waited for, and survives its resume', async () => {
    const resumed = await insertWorkflow('CANCELLED', OLD_MS);
    const other = await insertWorkflow('SUCCESS', OLD_MS);
    const resume = await openTransaction(orm);
    await resume.query(`update dbos.workflow_status set status = 'ENQUEUED', completed_at = null where workflow_uuid = $1`, [resumed]);
    const deleted = await deleteFinishedWorkflows(orm, RETENTION_MS, 100);
    await resume.commit();
    assert.equal(deleted.workflows, 1);
    const left = await rowsLeft([resumed, other]);
    assert.equal(left[other], 0);
    assert.ok(left[resumed] > 0);
    assert.deepEqual(await sql(orm, 'select status from dbos.workflow_status where workflow_uuid = $1', [resumed]), [
      { status: 'ENQUEUED' },
    ]);
  });

  it('race: concurrent retention passes delete each workflow once', async () => {
    const ids = [];
    for (let i = 0; i < 12; i++) ids.push(await insertWorkflow('SUCCESS', OLD_MS + i));
    const results = await Promise.all([1, 2, 3, 4].map(() => deleteFinishedWorkflows(orm, RETENTION_MS, 5)));
    const rest = await deleteFinishedWorkflows(orm, RETENTION_MS, 100);
    const all = [...results, rest];
    assert.equal(
      all.reduce((n, r) => n + r.workflows, 0),
      12,
    );
    assert.equal(
      all.reduce((n, r) => n + r.steps, 0),
      24,
    );
    assert.deepEqual(Object.values(await rowsLeft(ids)), new Array(12).fill(0));
  });
});
