import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { FlatConsoleClient, newOperator, type OperatorLogin } from '../support/console';
import { waitFor } from '../support/wait';
import { uuidv7 } from '../../db/ids';

const DAY = 86_400_000;

/**
 * The DMARC ramp from the console on the shared service (embedded engine): started at p=none, an
 * advance refused while the gate fails and applied once reports seeded into the reports tables make
 * it hold, the step back proposed when this service's alignment falls, and stop ending the run.
 * The service's activities read the system clock, so reports and the step's start are placed
 * relative to now.
 */
describe('console: the DMARC policy ramp', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let t: Tenant;
  let admin: OperatorLogin;
  let c: FlatConsoleClient;
  let domain: { id: string; name: string; return_path: string };
  let base: string;
  const sql = <T = Record<string, unknown>>(q: string, v: unknown[]) => env.service.db.orm.em.fork().getConnection().execute<T[]>(q, v);
  const ramp = async () => (await sql<Record<string, any>>(`select * from dmarc_ramps where domain_id = ?`, [domain.id]))[0]!;
  const audit = async (action: string) =>
    (await t.call('GET', `/api/v1/audit-log?action=${action}`, { as: 'admin' })).body.data as {
      actor: string;
      details: Record<string, any>;
    }[];
  const dmarcRecord = async () =>
    (
      (await t.call('GET', `/api/v1/domains/${domain.id}`, { as: 'admin' })).body.records as {
        purpose: string;
        name: string;
        value: string;
      }[]
    ).filter((r) => r.purpose === 'dmarc');

  /** One report a day, `daysAgo` days back: this service's mail (aligned share given) and one other source. */
  async function seedReport(
    daysAgo: number,
    ours: { count: number; aligned: number },
    other?: { ip: string; count: number; aligned: number },
  ) {
    const id = uuidv7();
    const begin = new Date(Date.now() - daysAgo * DAY);
    await sql(
      `insert into dmarc_reports (id, domain_id, reporter, report_id, begin_at, end_at, received_at) values (?, ?, 'google.com', ?, ?, ?, now())`,
      [id, domain.id, `r-${id}`, begin, new Date(begin.getTime() + 3_600_000)],
    );
    const row = (ip: string, count: number, aligned: boolean, isOurs: boolean) =>
      sql(
        `insert into dmarc_report_rows (report_id, source_ip, count, disposition, dkim_aligned, spf_aligned, header_from, ours)
          values (?, ?, ?, 'none', ?, ?, ?, ?)`,
        [id, ip, count, aligned, false, domain.name, isOurs],
      );
    if (ours.aligned) await row('192.0.2.10', ours.aligned, true, true);
    if (ours.count > ours.aligned) await row('192.0.2.10', ours.count - ours.aligned, false, true);
    if (other) {
      if (other.aligned) await row(other.ip, other.aligned, true, false);
      await row(other.ip, other.count - other.aligned, false, false);
    }
  }

  const runStatus = async (id: string) =>
    (await sql<{ status: string }>(`select status from dbos.workflow_status where workflow_uuid = ?`, [id]))[0]?.status;

  /** Posts a request and waits for the run to apply it (the row's request cleared). */
  async function request(kind: 'advance' | 'back' | 'stop') {
    assert.equal((await c.post(`${base}/dmarc-ramp/${kind}`)).status, 303);
    await waitFor(async () => (await ramp()).requested === null || (await ramp()).state === 'stopped', `the ${kind} applied`);
  }

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
    admin = await newOperator(env, t.orgId);
    c = new FlatConsoleClient(env.url);
    assert.equal((await c.signIn(admin.email, admin.password)).status, 303);
    const created = await t.call('POST', '/api/v1/domains', { as: 'admin', body: { name: `ramp-${Date.now()}.example.test` } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    domain = created.body;
    base = `/console/o/${t.orgId}/domains/${domain.id}`;
  });

  it('starts at p=none: the record written for RFC 7489 and DMARCbis alike, audited, the gate checked by the run', async () => {
    assert.match((await c.get(base)).html, /Start the DMARC ramp/);
    assert.equal((await c.post(`${base}/dmarc-ramp/start`)).status, 303);
    assert.equal((await c.post(`${base}/dmarc-ramp/start`)).status, 409, 'a second start is refused while it runs');
    const want = `v=DMARC1; p=none; rua=mailto:dmarc-reports@${domain.return_path}`;
    assert.deepEqual(
      (await dmarcRecord()).map((r) => [r.name, r.value]),
      [[`_dmarc.${domain.name}`, want]],
    );
    const [set] = await audit('domain.dmarc_step_set');
    assert.equal(set!.actor, `console:${admin.email}`);
    assert.equal(set!.details.to, 'none');
    await waitFor(async () => (await ramp()).verdict, 'the first verdict');
    const page = (await c.get(base)).html;
    assert.ok(page.includes(want));
    assert.match(page, /does not hold/);
    assert.match(page, /0 of 14 days/);
    assert.doesNotMatch(page, /Advance to p=quarantine/, 'no step forward offered while the gate fails');
  });

  it('refuses an advance whose gate fails, recording why; applies it once the reports make the gate hold', async () => {
    await request('advance');
    let r = await ramp();
    assert.equal(r.step, 'none');
    assert.match(r.refusal.reasons.join(' '), /0 of 14 days/);
    const [refused] = await audit('domain.dmarc_step_refused');
    assert.equal(refused!.actor, `console:${admin.email}`);
    assert.match((await c.get(base)).html, /Advance refused/);

    // 14 days of reports at p=none: ours 99.9% aligned; another source, 5% of the volume, failing.
    await sql(`update dmarc_ramps set step_since = ? where domain_id = ?`, [new Date(Date.now() - 20 * DAY), domain.id]);
    for (let day = 1; day <= 14; day++) await seedReport(day, { count: 1000, aligned: 999 }, { ip: '203.0.113.5', count: 50, aligned: 0 });
    await request('advance');
    r = await ramp();
    assert.equal(r.step, 'none');
    assert.match(r.refusal.reasons.join(' '), /203\.0\.113\.5/);

    // The operator marks that source unauthorized (the reports page's action; here straight in its table).
    await sql(
      `insert into dmarc_sources (domain_id, source_ip, unauthorized, marked_by, marked_at) values (?, '203.0.113.5', true, 'console:x', now())`,
      [domain.id],
    );
    await request('advance');
    r = await ramp();
    assert.equal(r.step, 'quarantine');
    assert.deepEqual(
      (await dmarcRecord()).map((x) => x.value),
      [`v=DMARC1; p=quarantine; rua=mailto:dmarc-reports@${domain.return_path}`],
    );
    const sets = await audit('domain.dmarc_step_set');
    assert.ok(sets.some((s) => s.details.from === 'none' && s.details.to === 'quarantine' && s.actor === `console:${admin.email}`));
  });

  it('says when alignment falls and proposes the step back; back and stop are applied and audited', async () => {
    await seedReport(0.1, { count: 1000, aligned: 900 });
    // An advance (refused: no days at quarantine yet) records a fresh verdict now.
    await request('advance');
    const page = (await c.get(base)).html;
    assert.match(page, /Alignment fell/);
    assert.match(page, /Step back to p=none/);
    await request('back');
    assert.equal((await ramp()).step, 'none');
    assert.match((await dmarcRecord())[0]!.value, /p=none;/);
    await request('stop');
    assert.equal((await ramp()).state, 'stopped');
    assert.equal((await audit('domain.dmarc_ramp_stopped'))[0]!.actor, `console:${admin.email}`);
    await waitFor(async () => (await runStatus((await ramp()).run_id)) === 'SUCCESS', 'the run ended');
    assert.match((await c.get(base)).html, /ramp stopped/);
    assert.equal((await c.post(`${base}/dmarc-ramp/advance`)).status, 409, 'no request once stopped');
  });

  it('starts a stopped ramp again under a run of its own, at the step it stopped at', async () => {
    const before = await ramp();
    assert.equal(before.state, 'stopped');
    assert.match((await c.get(base)).html, /Start the ramp again/);
    assert.equal((await c.post(`${base}/dmarc-ramp/start`)).status, 303);
    const again = await ramp();
    assert.equal(again.state, 'running');
    assert.equal(again.step, before.step);
    assert.notEqual(again.run_id, before.run_id);
    assert.equal(await runStatus(before.run_id), 'SUCCESS', 'the old run stays ended');
    const [restarted] = await audit('domain.dmarc_ramp_restarted');
    assert.equal(restarted!.actor, `console:${admin.email}`);
    assert.equal(restarted!.details.step, before.step);
    await waitFor(async () => (await ramp()).verdict, 'the new run checks the gate');
    // Its requests reach the new run.
    await request('stop');
    assert.equal((await ramp()).state, 'stopped');
    await waitFor(async () => (await runStatus(again.run_id)) === 'SUCCESS', 'the second run ended');
    assert.equal((await c.post(`${base}/dmarc-ramp/start`)).status, 303, 'and again');
    assert.equal((await ramp()).state, 'running');
    await request('stop');
  });
});
