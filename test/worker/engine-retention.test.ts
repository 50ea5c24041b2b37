import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import pino from 'pino';
import { EngineRetention } from '../../worker/engine-retention';
import { domainVerification } from '../../workflows/domain-verification';
import { sharedService, type TestEnv } from '../support/service';
import { waitFor } from '../support/wait';

const DAY_MS = 86_400_000;
/** Everything older than this is ours: the test database was made in this run, so only rows this file backdates are that old. */
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

describe('EngineRetention: finished workflows leave the engine tables once past the retention', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let db: Client;
  const tag = `retention-test-${process.pid}-${Date.now()}`;
  const log = pino({ level: 'silent' });

  before(async () => {
    env = await sharedService();
    db = new Client({ connectionString: env.service.db.url });
    await db.connect();
  });
  after(async () => {
    // Rows the retention was meant to keep (running, queued, delayed) must not outlive the test.
    for (const [table, column] of TABLES) await db.query(`delete from dbos.${table} where ${column} like $1`, [`${tag}:%`]);
    await db.end();
  });

  /**
   * A workflow's rows as DBOS 5.3 writes them, in every engine table, last updated `ageMs` ago on
   * the database's clock. Its queue and application are none the service runs, so no process
   * dequeues, delays or recovers it.
   */
  async function insertWorkflow(name: string, status: string, ageMs: number): Promise<string> {
    const id = `${tag}:${name}`;
    const finished = ['SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED'].includes(status);
    await db.query(
      `insert into dbos.workflow_status (workflow_uuid, status, name, executor_id, application_version, application_name, queue_name,
                                         created_at, updated_at, completed_at, delay_until_epoch_ms, recovery_attempts)
       values ($1, $2, 'RetentionTest', 'retention-test', 'retention-test', 'retention-test', $3,
               (extract(epoch from now()) * 1000)::bigint - $4 - 60000, (extract(epoch from now()) * 1000)::bigint - $4,
               case when $5 then (extract(epoch from now()) * 1000)::bigint - $4 end, $6, 1)`,
      [
        id,
        status,
        ['ENQUEUED', 'DELAYED'].includes(status) ? 'retention-test' : null,
        ageMs,
        finished,
        status === 'DELAYED' ? Date.now() + DAY_MS : null,
      ],
    );
    await db.query(`insert into dbos.workflow_input (workflow_uuid, inputs) values ($1, '[{"n":1}]')`, [id]);
    for (const step of [0, 1])
      await db.query(
        `insert into dbos.operation_outputs (workflow_uuid, function_id, function_name, output, started_at_epoch_ms, completed_at_epoch_ms)
         values ($1, $2, 'step', '{"ok":true}', 0, 0)`,
        [id, step],
      );
    await db.query(`insert into dbos.notifications (destination_uuid, topic, message) values ($1, 'wake', '{}')`, [id]);
    await db.query(`insert into dbos.workflow_events (workflow_uuid, key, value) values ($1, 'progress', '1')`, [id]);
    await db.query(`insert into dbos.workflow_events_history (workflow_uuid, function_id, key, value) values ($1, 2, 'progress', '1')`, [
      id,
    ]);
    await db.query(`insert into dbos.streams (workflow_uuid, key, value, "offset") values ($1, 'log', '"x"', 0)`, [id]);
    if (finished) await db.query(`insert into dbos.workflow_output (workflow_uuid, output) values ($1, '"done"')`, [id]);
    return id;
  }

  /** Rows per engine table for each id. */
  async function footprint(ids: string[]): Promise<Record<string, Record<string, number>>> {
    const out: Record<string, Record<string, number>> = Object.fromEntries(ids.map((id) => [id, {}]));
    for (const [table, column] of TABLES) {
      const { rows } = await db.query<{ id: string; n: number }>(
        `select ${column} as id, count(*)::int as n from dbos.${table} where ${column} = any($1) group by 1`,
        [ids],
      );
      for (const id of ids) out[id][table] = rows.find((r) => r.id === id)?.n ?? 0;
    }
    return out;
  }

  /** A real DomainVerification run (for a domain that does not exist, so it ends after one check), finished. */
  async function finishedRealWorkflow(name: string): Promise<string> {
    const id = `${tag}:${name}`;
    await env.service.engine.start(domainVerification, id, {
      domainId: randomUUID(),
      firstDelayMs: 1000,
      maxDelayMs: 1000,
      windowMs: 1000,
    });
    await waitFor(
      async () => (await db.query(`select 1 from dbos.workflow_status where workflow_uuid = $1 and status = 'SUCCESS'`, [id])).rowCount,
      `workflow ${id} to finish`,
    );
    return id;
  }

  const backdate = (ids: string[]) =>
    db.query(
      `update dbos.workflow_status set created_at = created_at - $2, updated_at = updated_at - $2, completed_at = completed_at - $2
        where workflow_uuid = any($1)`,
      [ids, OLD_MS],
    );

  it('deletes old finished workflows with every row they left, page by page; running, queued, delayed and recent ones stay', async () => {
    const realOld = [await finishedRealWorkflow('real-old-1'), await finishedRealWorkflow('real-old-2')];
    const realRecent = await finishedRealWorkflow('real-recent');
    await backdate(realOld);
    const syntheticOld = [
      await insertWorkflow('old-success', 'SUCCESS', OLD_MS),
      await insertWorkflow('old-error', 'ERROR', OLD_MS),
      await insertWorkflow('old-cancelled', 'CANCELLED', OLD_MS),
      await insertWorkflow('old-dead-lettered', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED', OLD_MS),
    ];
    const kept = [
      realRecent,
      await insertWorkflow('old-pending', 'PENDING', OLD_MS),
      await insertWorkflow('old-enqueued', 'ENQUEUED', OLD_MS),
      await insertWorkflow('old-delayed', 'DELAYED', OLD_MS),
      await insertWorkflow('recent-error', 'ERROR', DAY_MS),
      await insertWorkflow('just-finished', 'SUCCESS', 0),
    ];
    const doomed = [...realOld, ...syntheticOld];
    const before = await footprint([...doomed, ...kept]);
    for (const id of realOld) assert.ok(before[id].operation_outputs > 0, `the real run ${id} recorded its steps`);

    const retention = new EngineRetention(env.service.db.orm, { retentionMs: RETENTION_MS, pageSize: 2, log });
    assert.equal(await retention.runOnce(), doomed.length);

    const after = await footprint([...doomed, ...kept]);
    for (const id of doomed)
      assert.deepEqual(after[id], Object.fromEntries(TABLES.map(([t]) => [t, 0])), `${id}: no row left in any engine table`);
    for (const id of kept) assert.deepEqual(after[id], before[id], `${id}: every row kept`);
    assert.equal(await retention.runOnce(), 0, 'a second sweep finds nothing');
  });

  it('sweeps running at once (two processes) share the work: each workflow deleted once, none left', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) ids.push(await insertWorkflow(`shared-${i}`, 'SUCCESS', OLD_MS));
    const a = new EngineRetention(env.service.db.orm, { retentionMs: RETENTION_MS, pageSize: 3, log });
    const b = new EngineRetention(env.service.db.orm, { retentionMs: RETENTION_MS, pageSize: 3, log });
    const [na, nb] = await Promise.all([a.runOnce(), b.runOnce()]);
    assert.equal(na + nb, ids.length);
    const left = await db.query(`select count(*)::int as n from dbos.workflow_status where workflow_uuid = any($1)`, [ids]);
    assert.equal(left.rows[0].n, 0);
  });

  it('runs by itself once started, and does nothing with a retention of 0', async () => {
    const id = await insertWorkflow('by-itself', 'ERROR', OLD_MS);
    const off = new EngineRetention(env.service.db.orm, { retentionMs: 0, log });
    off.start();
    assert.equal(await off.runOnce(), 0);
    await off.stop();
    assert.equal((await footprint([id]))[id].workflow_status, 1, 'retention 0 keeps everything');

    const on = new EngineRetention(env.service.db.orm, { retentionMs: RETENTION_MS, intervalMs: 100, log });
    on.start();
    try {
      await waitFor(async () => (await footprint([id]))[id].workflow_status === 0, 'the started loop to delete the old workflow');
    } finally {
      await on.stop();
    }
  });
});
