import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { RUN_COLUMNS, runValues } from '../../db/sql/automation-run-insert';
import { insertAutomation, insertContact, insertSender, ms, openTestDb, sql, type Row } from '../support/db-fixtures';

// RUN_COLUMNS/runValues are a fragment shared by two statements (record-events.ts, automation-outbox.ts);
// no race of their own (a run's id and dedupe key are the callers'). Tested in a statement of their own.
describe('db/sql/automation-run-insert: the columns of a new run, parked at once behind a long first delay', function () {
  let orm: Orm;
  let org: Row;
  let key: Row;
  let contact: Row;

  before(async () => {
    orm = await openTestDb('db_automation_run_insert');
    ({ organization: org, key } = await insertSender(orm));
    contact = await insertContact(orm, org.id);
  });
  after(async () => orm.close());

  /** Inserts a run of automation `a` for the contact with runValues, at `now`; answers the row. */
  async function start(a: Row, now: Date): Promise<Row> {
    const values = runValues({
      id: 'gen_random_uuid()',
      org: 'a.organization_id',
      a: 'a',
      contact: '$2::uuid',
      email: '$3::text',
      key: "'key-1'",
      trigger: `jsonb_build_object('type', 'event')`,
      data: `'{"plan":"pro"}'::jsonb`,
      now: '$4::timestamptz',
    });
    const [row] = await sql(
      orm,
      `insert into automation_runs (${RUN_COLUMNS}) select ${values} from automations a where a.id = $1 returning *`,
      [a.id, contact.id, contact.email, now],
    );
    return row;
  }

  it('a run of an automation starting with a step: running, at the start, segment 0, not parked', async () => {
    const a = await insertAutomation(orm, org.id, key.id, { version: 3 });
    const now = new Date('2030-01-01T00:00:00Z');
    const run = await start(a, now);
    assert.equal(run.organization_id, org.id);
    assert.equal(run.automation_id, a.id);
    assert.equal(run.version, 3);
    assert.equal(run.contact_id, contact.id);
    assert.equal(run.email, contact.email);
    assert.equal(run.dedupe_key, 'key-1');
    assert.deepEqual(run.data, { plan: 'pro' });
    assert.equal(run.status, 'running');
    assert.equal(run.step, null);
    assert.deepEqual(run.history, []);
    assert.equal(run.resume_at, null);
    assert.equal(run.resume_path, null);
    assert.equal(run.segment, 0);
    assert.equal(ms(run.created_at), now.getTime());
    assert.equal(ms(run.updated_at), now.getTime());
  });

  it('a run of an automation starting with a long delay: parked in steps[0] until now + the delay, segment 1', async () => {
    const a = await insertAutomation(orm, org.id, key.id, { park_first_seconds: 86_400 });
    const now = new Date('2030-01-01T00:00:00Z');
    const until = now.getTime() + 86_400_000;
    const run = await start(a, now);
    assert.equal(run.status, 'running');
    assert.equal(run.step, 'steps[0]');
    assert.equal(run.resume_path, 'steps[0]');
    assert.equal(ms(run.resume_at), until);
    assert.equal(run.segment, 1);
    assert.equal(run.history.length, 1);
    const [entry] = run.history;
    assert.equal(entry.step, 'steps[0]');
    assert.equal(entry.type, 'delay');
    assert.equal(entry.parked, true);
    assert.equal(ms(entry.started_at), now.getTime());
    assert.equal(ms(entry.until), until);
  });
});
