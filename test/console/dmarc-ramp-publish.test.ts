import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { FlatConsoleClient, newOperator, type OperatorLogin } from '../support/console';
import { MANAGED_COMMENT } from '../../core/dns-publish/rules';
import { waitFor } from '../support/wait';
import { uuidv7 } from '../../db/ids';

const DAY = 86_400_000;

/**
 * The DMARC ramp publishing its steps to Cloudflare when the domain's organization is internal and
 * has a token attached (the shared service, embedded engine, the local Cloudflare-compatible API
 * whose zones TestDns serves): the start's record and each step's, one `_dmarc` record of the
 * service's own, never over someone else's, and a refusal shown on the page without stopping the ramp.
 */
describe('console: the DMARC ramp publishes its steps to a connected Cloudflare zone', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let t: Tenant;
  let platform: OperatorLogin;
  let admin: OperatorLogin;
  let p: FlatConsoleClient;
  let c: FlatConsoleClient;
  let token: string;

  const sql = <T = Record<string, unknown>>(q: string, v: unknown[]) => env.service.db.orm.em.fork().getConnection().execute<T[]>(q, v);
  const ramp = async (id: string) => (await sql<Record<string, any>>(`select * from dmarc_ramps where domain_id = ?`, [id]))[0]!;
  const dmarcAt = (name: string) => env.cloudflare.records(`_dmarc.${name}`).filter((r) => r.type === 'TXT');
  const rua = (d: { return_path: string }) => `rua=mailto:dmarc-reports@${d.return_path}`;

  async function newDomain(): Promise<{ id: string; name: string; return_path: string; page: string }> {
    const name = `ramp-pub-${uuidv7().slice(-12)}.example.test`;
    const made = await t.call('POST', '/api/v1/domains', { as: 'admin', body: { name } });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    env.cloudflare.addZone(name);
    return { ...made.body, page: `/console/o/${t.orgId}/domains/${made.body.id}` };
  }

  /** Posts a request and waits for the run to apply it and publish what it set. */
  async function request(d: { id: string; page: string }, kind: 'advance' | 'back' | 'stop') {
    assert.equal((await c.post(`${d.page}/dmarc-ramp/${kind}`)).status, 303);
    await waitFor(async () => (await ramp(d.id)).requested === null, `the ${kind} applied`);
  }

  /** 14 days of reports at the current step: this service's mail, all aligned, so the gate holds. */
  async function gateHolds(domainId: string, name: string) {
    await sql(`update dmarc_ramps set step_since = ? where domain_id = ?`, [new Date(Date.now() - 20 * DAY), domainId]);
    for (let day = 1; day <= 14; day++) {
      const id = uuidv7();
      const begin = new Date(Date.now() - day * DAY);
      await sql(
        `insert into dmarc_reports (id, domain_id, reporter, report_id, begin_at, end_at, received_at) values (?, ?, 'google.com', ?, ?, ?, now())`,
        [id, domainId, `r-${id}`, begin, new Date(begin.getTime() + 3_600_000)],
      );
      await sql(
        `insert into dmarc_report_rows (report_id, source_ip, count, disposition, dkim_aligned, spf_aligned, header_from, ours)
          values (?, '192.0.2.10', 1000, 'none', true, false, ?, true)`,
        [id, name],
      );
    }
  }

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
    platform = await newOperator(env, null);
    admin = await newOperator(env, t.orgId);
    p = new FlatConsoleClient(env.url);
    c = new FlatConsoleClient(env.url);
    assert.equal((await p.signIn(platform.email, platform.password)).status, 303);
    assert.equal((await c.signIn(admin.email, admin.password)).status, 303);
  });

  it('does nothing with Cloudflare while the organization is not connected', async () => {
    const d = await newDomain();
    const before = env.cloudflare.requests.length;
    assert.equal((await c.post(`${d.page}/dmarc-ramp/start`)).status, 303);
    await waitFor(async () => (await ramp(d.id)).verdict, 'the first gate check');
    assert.equal(env.cloudflare.requests.length, before, 'no call to Cloudflare');
    assert.deepEqual(dmarcAt(d.name), []);
    assert.doesNotMatch((await c.get(d.page)).html, /class="dmarc-published/);
    await request(d, 'stop');
  });

  it('publishes the start and each step, advance and back, as one record of its own', async () => {
    const org = `/console/organizations/${t.orgId}`;
    assert.equal((await p.post(`${org}/internal`, { internal: 'yes' })).status, 303);
    token = env.cloudflare.addToken();
    const d = await newDomain();
    assert.equal((await p.post(`${org}/cloudflare`, { token })).status, 303);

    assert.equal((await c.post(`${d.page}/dmarc-ramp/start`)).status, 303);
    const want = (step: string) => `v=DMARC1; p=${step}; ${rua(d)}`;
    const published = async (step: string) => {
      await waitFor(async () => dmarcAt(d.name)[0]?.content === want(step), `p=${step} in the zone`);
      const held = dmarcAt(d.name);
      assert.equal(held.length, 1, 'one _dmarc record');
      assert.equal(held[0]!.comment, MANAGED_COMMENT);
      await waitFor(async () => /dmarc-published-verified/.test((await c.get(d.page)).html), 'the page shows it published');
    };
    await published('none');
    const [audit] = (await t.call('GET', '/api/v1/audit-log?action=domain.dns_published', { as: 'admin' })).body.data;
    assert.equal(audit.actor, `console:${admin.email}`);
    assert.deepEqual(
      audit.details.records.map((r: any) => [r.purpose, r.action]),
      [['dmarc', 'create']],
    );

    await gateHolds(d.id, d.name);
    await request(d, 'advance');
    assert.equal((await ramp(d.id)).step, 'quarantine');
    await published('quarantine');
    await request(d, 'back');
    await published('none');
    // Only the `_dmarc` record: the domain's other records were left to the console's publish.
    const dkim = (await t.call('GET', `/api/v1/domains/${d.id}`, { as: 'admin' })).body.records.find((r: any) => r.purpose === 'dkim');
    assert.deepEqual(env.cloudflare.records(dkim.name), []);

    // Cloudflare refusing: the step is applied all the same, the page says it was not published.
    await gateHolds(d.id, d.name);
    env.cloudflare.tokens.get(token)!.status = 'disabled';
    try {
      await request(d, 'advance');
      assert.equal((await ramp(d.id)).step, 'quarantine');
      await waitFor(async () => /dmarc-published-failed/.test((await c.get(d.page)).html), 'the page shows the failure');
      assert.match((await c.get(d.page)).html, /dmarc_publish_failed/);
      assert.equal(dmarcAt(d.name)[0]!.content, want('none'), 'the zone keeps what it had');
      assert.equal((await ramp(d.id)).state, 'running');
    } finally {
      env.cloudflare.tokens.get(token)!.status = 'active';
    }
    await request(d, 'stop');
  });

  it('never writes over a _dmarc record the service did not create, and the ramp goes on', async () => {
    const d = await newDomain();
    const theirs = env.cloudflare.seed(d.name, { type: 'TXT', name: `_dmarc.${d.name}`, content: 'v=DMARC1; p=reject' });
    assert.equal((await c.post(`${d.page}/dmarc-ramp/start`)).status, 303);
    await waitFor(async () => /dmarc-published-conflict/.test((await c.get(d.page)).html), 'the conflict shown');
    assert.deepEqual(dmarcAt(d.name), [theirs], 'their record alone, untouched');
    await waitFor(async () => (await ramp(d.id)).verdict, 'the gate checked');
    assert.equal((await ramp(d.id)).state, 'running');
    await request(d, 'stop');
  });
});
