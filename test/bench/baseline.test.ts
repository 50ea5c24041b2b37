import assert from 'node:assert/strict';
import { Client, Pool } from 'pg';
import { spawnBaseline, startBaseline } from '../../bench/baseline';
import { MESSAGE } from '../../bench/phase';
import { readStat } from '../../bench/proc-cpu';
import { postmasterOf } from '../../bench/service';
import { newDatabase } from '../support/pg';

const post = async (url: string, body: unknown) => {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(res.status, 200, await res.clone().text());
  return res.json();
};

describe('Bench: the baselines (bare Koa routes)', function () {
  this.timeout(120_000);
  let db: string;
  let client: Client;
  before(async () => {
    db = await newDatabase('bench_baseline');
    client = new Client({ connectionString: db });
    await client.connect();
  });
  after(() => client.end());

  it('the batch baseline stores a 100-item array in one INSERT, a row per item with its message, recipient and queued event, and answers their ids', async () => {
    const baseline = await startBaseline(db, 2);
    const statements: string[] = [];
    const query = Pool.prototype.query;
    Pool.prototype.query = function (this: Pool, ...args: unknown[]) {
      statements.push(String(args[0]).trim().split(/\s+/)[0]);
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof Pool.prototype.query;
    let answer: { data: { id: string }[] };
    try {
      const items = Array.from({ length: 100 }, (_, i) => ({ ...MESSAGE, to: `Someone-${i}@Example.com` }));
      answer = (await post(baseline.batchUrl, items)) as { data: { id: string }[] };
    } finally {
      Pool.prototype.query = query;
      await baseline.stop();
    }
    assert.deepEqual(statements, ['insert'], 'one statement');
    assert.equal(answer.data.length, 100);
    const { rows } = await client.query(
      `select id, from_address, to_addresses, subject, html, text, address, field, status, state, event_type, created_at = event_at as same_time
         from bench_baseline_batch`,
    );
    assert.equal(rows.length, 100);
    assert.deepEqual(new Set(rows.map((r) => r.id)), new Set(answer.data.map((d) => d.id)));
    const first = rows.find((r) => r.address === 'someone-0@example.com');
    assert.deepEqual(
      { ...first, id: undefined },
      {
        id: undefined,
        from_address: MESSAGE.from,
        to_addresses: ['Someone-0@Example.com'],
        subject: MESSAGE.subject,
        html: MESSAGE.html,
        text: MESSAGE.text,
        address: 'someone-0@example.com',
        field: 'to',
        status: 'queued',
        state: 'pending',
        event_type: 'queued',
        same_time: true,
      },
    );
    // As wide as a stored message with its recipient and event: the columns the store statement fills for a plain message.
    const { rows: columns } = await client.query(
      `select count(*)::int as n from information_schema.columns where table_name = 'bench_baseline_batch'`,
    );
    assert.ok(columns[0].n >= 29, `${columns[0].n} columns`);
  });

  it('runs in a process of its own: the single route stores one row, and the process stops when told', async () => {
    const baseline = await spawnBaseline(db, 2);
    try {
      assert.notEqual(baseline.pid, process.pid);
      const { id } = (await post(baseline.url, MESSAGE)) as { id: string };
      const { rows } = await client.query('select body from bench_baseline where id = $1', [id]);
      assert.deepEqual(rows[0].body, MESSAGE);
    } finally {
      await baseline.stop();
    }
    assert.throws(() => process.kill(baseline.pid, 0), /ESRCH/, 'the process is gone');
  });

  it("finds PostgreSQL's postmaster when it runs on this machine (its processes' CPU is read from /proc)", async function () {
    if (process.platform !== 'linux') this.skip();
    const pid = await postmasterOf(db);
    assert.ok(pid !== null);
    assert.equal(readStat(pid)!.comm, 'postgres');
    const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
    assert.equal(readStat(rows[0].pid)!.ppid, pid, "a backend is the postmaster's child");
  });
});
