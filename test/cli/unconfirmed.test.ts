import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { openOrm, type Orm } from '../../db/orm';
import { createDomain, createKey, createOrganization } from '../../core/provisioning';
import { parseDuration } from '../../core/time';
import { newDatabase, tempDir } from '../support/pg';
import { runSvc, svcJson } from '../support/child';

/** `svc email unconfirmed` against its own database: counts, closes in batches with audit rows, scoped by --org. */
describe('svc email unconfirmed', function () {
  this.timeout(120_000);
  let url: string;
  let orm: Orm;
  let env: Record<string, string>;
  const orgs: { id: string; key: string; domain: string }[] = [];

  before(async () => {
    url = await newDatabase('svc_unconfirmed');
    env = { DATABASE_URL: url, DATA_DIR: tempDir('svc-unconfirmed') };
    assert.deepEqual(await svcJson(['migrate'], env), { migrated: true });
    orm = await openOrm(url, 2);
    for (const name of ['A', 'B']) {
      const org = await createOrganization(orm, name);
      const domain = await createDomain(orm, org.id, `${name.toLowerCase()}.example.test`, { verified: true });
      const key = await createKey(orm, org.id, { name: 'k', permission: 'send', mode: 'live' });
      orgs.push({ id: org.id, key: key.key.id, domain: domain.id });
    }
  });
  after(async () => orm?.close());

  /** A message of `org` at `status`, sent `hoursAgo` hours ago. */
  async function seed(org: (typeof orgs)[number], status: string, hoursAgo: number, mode = 'live'): Promise<string> {
    const id = randomUUID();
    await orm.em
      .fork()
      .getConnection()
      .execute(
        `insert into emails (id, organization_id, api_key_id, domain_id, from_address, to_addresses, subject, mode, status, message_id, sent_at, created_at, updated_at)
         values (?, ?, ?, ?, 'a@x.test', '["b@y.test"]', 's', ?, ?, ?, now() - make_interval(hours => ?), now() - make_interval(hours => ?), now())`,
        [id, org.id, org.key, org.domain, mode, status, `<${id}@x.test>`, hoursAgo, hoursAgo],
      );
    return id;
  }
  const statusOf = async (id: string) =>
    (await orm.em.fork().getConnection().execute(`select status from emails where id = ?`, [id]))[0].status as string;
  const audits = async (orgId: string) =>
    orm.em
      .fork()
      .getConnection()
      .execute(`select api_key_id, target_type, details from audit_log where organization_id = ? and action = 'email.closed_unconfirmed'`, [
        orgId,
      ]);

  it('reads durations: short units and ISO 8601, never zero', () => {
    assert.equal(parseDuration('90m'), 90 * 60_000);
    assert.equal(parseDuration('36h'), 36 * 3_600_000);
    assert.equal(parseDuration('3d'), 3 * 86_400_000);
    assert.equal(parseDuration('P3D'), 3 * 86_400_000);
    assert.equal(parseDuration('PT36H'), 36 * 3_600_000);
    assert.equal(parseDuration('P1DT12H30M'), 36.5 * 3_600_000);
    for (const bad of ['0h', 'P', 'PT', 'P1M', '3 days', '-3d', '1.5h', 'P1Y', '', 'h']) assert.equal(parseDuration(bad), null, bad);
  });

  it('a dry run counts live sent messages older than the threshold and changes nothing; --close closes exactly those', async () => {
    const [a, b] = orgs;
    const old1 = await seed(a, 'sent', 80);
    const old2 = await seed(b, 'sent', 100);
    const fresh = await seed(a, 'sent', 1);
    const delivered = await seed(a, 'delivered', 80);
    const bounced = await seed(b, 'bounced', 80);
    const test = await seed(a, 'sent', 80, 'test');

    const report = await svcJson(['email', 'unconfirmed', '--older-than', '72h'], env);
    assert.equal(report.object, 'unconfirmed_report');
    assert.equal(report.count, 2);
    assert.ok(Date.parse(report.oldest_sent_at) < Date.now() - 99 * 3_600_000);
    assert.equal(await statusOf(old1), 'sent', 'a dry run writes nothing');

    const closed = await svcJson(['email', 'unconfirmed', '--older-than', 'P3D', '--close'], env);
    assert.deepEqual([closed.closed, closed.batches], [2, 1]);
    assert.equal(await statusOf(old1), 'unconfirmed');
    assert.equal(await statusOf(old2), 'unconfirmed');
    for (const [id, status] of [
      [fresh, 'sent'],
      [delivered, 'delivered'],
      [bounced, 'bounced'],
      [test, 'sent'],
    ]) {
      assert.equal(await statusOf(id), status);
    }
    // One audit row per batch per organization, by an operator (no key), naming the messages.
    for (const [org, id] of [
      [a, old1],
      [b, old2],
    ] as const) {
      const rows = await audits(org.id);
      assert.equal(rows.length, 1);
      assert.equal(rows[0].api_key_id, null);
      assert.equal(rows[0].target_type, 'email_batch');
      assert.deepEqual([rows[0].details.count, rows[0].details.email_ids], [1, [id]]);
    }
    const again = await svcJson(['email', 'unconfirmed', '--older-than', '72h', '--close'], env);
    assert.equal(again.closed, 0, 'a second run finds nothing');
  });

  it('--org limits the close to one organization, in batches of 1,000', async () => {
    const [a, b] = orgs;
    const conn = orm.em.fork().getConnection();
    // 1,001 old messages of A (two batches), one of B.
    await conn.execute(
      `insert into emails (id, organization_id, api_key_id, domain_id, from_address, to_addresses, subject, mode, status, message_id, sent_at, created_at, updated_at)
       select gen_random_uuid(), ?, ?, ?, 'a@x.test', '["b@y.test"]', 's', 'live', 'sent', '<' || g || '@bulk.test>', now() - interval '5 days', now() - interval '5 days', now()
         from generate_series(1, 1001) g`,
      [a.id, a.key, a.domain],
    );
    const other = await seed(b, 'sent', 120);
    const before = (await audits(a.id)).length;
    const closed = await svcJson(['email', 'unconfirmed', '--older-than', '4d', '--close', '--org', a.id], env);
    assert.deepEqual([closed.closed, closed.batches], [1001, 2]);
    assert.equal((await audits(a.id)).length, before + 2);
    assert.equal(await statusOf(other), 'sent', 'another organization is untouched');
  });

  it('refuses bad durations and ids with a usage error', async () => {
    for (const args of [
      ['email', 'unconfirmed'],
      ['email', 'unconfirmed', '--older-than', '0d'],
      ['email', 'unconfirmed', '--older-than', 'soon'],
      ['email', 'unconfirmed', '--older-than', '3d', '--org', 'nope'],
    ]) {
      const child = runSvc(args, env);
      const code = await child.exited;
      assert.equal(code, 2, `${args.join(' ')}: ${child.output()}`);
    }
  });
});
