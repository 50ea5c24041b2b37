import assert from 'node:assert/strict';
import pg from 'pg';
import { SmtpSink } from '../support/sink';
import { runSvc, crashTestSvc, waitHealthy, svcJson, type Child } from '../support/child';
import { request } from '../support/http';
import { waitFor } from '../support/wait';

/**
 * A broadcast's fan-out killed mid-way (SIGKILL, between pages or inside one) resumes after a
 * restart from its cursor: every frozen recipient gets exactly one message, none twice.
 */
describe('Engine: a broadcast fan-out killed mid-way resumes after restart', function () {
  this.timeout(240_000);
  let sink: SmtpSink;
  let child: Child | undefined;
  let db: pg.Client | undefined;

  before(async () => {
    sink = new SmtpSink();
    await sink.start();
  });
  after(async () => {
    if (child && child.proc.exitCode === null) child.proc.kill('SIGKILL');
    await db?.end();
    await sink.stop();
  });

  it('mails each frozen recipient exactly once', async () => {
    const { env, base } = await crashTestSvc('broadcast_crash', sink.port);
    child = runSvc(['start'], env);
    await waitHealthy(base, child);
    // The free plan's 100 a day: the rest of the messages park, so the test measures the fan-out, not delivery.
    const org = await svcJson(['org', 'create', '--name', 'Broadcast Co'], env);
    await svcJson(['domain', 'create', '--org', org.id, '--name', 'news.example.test', '--stream', 'bulk', '--verified'], env);
    const key = await svcJson(['key', 'create', '--org', org.id, '--name', 'k', '--permission', 'admin', '--mode', 'live'], env);
    db = new pg.Client({ connectionString: env.DATABASE_URL });
    await db.connect();
    const total = 20_000;
    await db.query(
      `insert into contacts (id, organization_id, email, status, properties, created_at, updated_at)
       select gen_random_uuid(), $1, 'reader' || g || '@people.example', 'subscribed', '{}', now(), now() from generate_series(1, $2::int) g`,
      [org.id, total],
    );
    const call = (method: string, path: string, body?: unknown) => request(base, method, path, { token: key.token, body });
    const segment = await call('POST', '/api/v1/segments', { name: 'All', filter: { all: [{ status: 'SUBSCRIBED' }] } });
    assert.equal(segment.status, 201, JSON.stringify(segment.body));
    const created = await call('POST', '/api/v1/broadcasts', {
      segment_id: segment.body.id,
      from: 'news@news.example.test',
      subject: 'Crash test',
      text: 'once each',
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.id;

    // Kill it once the first pages are in and well before the last.
    const progress = async () => (await db!.query('select enqueued, recipients from broadcasts where id = $1', [id])).rows[0];
    const at = await waitFor(
      async () => {
        const p = await progress();
        return p.enqueued >= 2000 ? p : undefined;
      },
      'the first pages',
      60_000,
      5,
    );
    child.proc.kill('SIGKILL');
    await child.exited;
    const killedAt = (await progress()).enqueued;
    assert.equal(at.recipients, total);
    assert.ok(killedAt < total, `killed mid-way (at ${killedAt} of ${total})`);

    child = runSvc(['start'], env);
    await waitHealthy(base, child);
    const done = await waitFor(
      async () => {
        const b = (await call('GET', `/api/v1/broadcasts/${id}`)).body;
        return b.enqueued_at ? b : undefined;
      },
      'the resumed fan-out',
      120_000,
    );
    assert.equal(done.recipients, total);
    // One message per key, and a message for every frozen recipient (its key names its contact).
    const { rows } = await db.query(
      `select count(*)::int as messages, count(distinct e.idempotency_key)::int as keys,
              (select count(*)::int from broadcast_recipients r
                where r.broadcast_id = $1
                  and not exists (select 1 from emails x where x.organization_id = $2
                                     and x.idempotency_key = 'broadcast:' || $1 || ':' || r.contact_id)) as missing
         from emails e where e.broadcast_id = $1`,
      [id, org.id],
    );
    assert.deepEqual(rows[0], { messages: total, keys: total, missing: 0 });
    child.proc.kill('SIGINT');
    assert.equal(await child.exited, 0);
  });
});
