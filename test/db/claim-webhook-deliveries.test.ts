import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { claimWebhookDeliveries, unclaimWebhookDeliveries } from '../../db/sql/claim-webhook-deliveries';
import {
  concurrently,
  insertOrganization,
  insertWebhookDelivery,
  insertWebhookEndpoint,
  openTestDb,
  sql,
  type Row,
} from '../support/db-fixtures';

// This statement reads the database's clock (now()); the tests date rows relative to it.
describe('db/sql/claim-webhook-deliveries: unstarted deliveries, per endpoint within its window, each claimed once', function () {
  let orm: Orm;
  let org: Row;
  const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000);

  before(async () => {
    orm = await openTestDb('db_claim_webhook_deliveries');
    org = await insertOrganization(orm);
  });
  after(async () => orm.close());
  // The claim serves every endpoint: each test starts with nothing to claim.
  beforeEach(async () => {
    await sql(orm, "update webhook_deliveries set status = 'delivered', enqueued_at = coalesce(enqueued_at, now())");
  });

  /** `n` fresh deliveries of the endpoint, created one millisecond apart (oldest first), due now. */
  async function deliveries(endpoint: Row, n: number, over: Row = {}): Promise<Row[]> {
    const base = Date.now() - 60_000;
    const out: Row[] = [];
    for (let i = 0; i < n; i++)
      out.push(await insertWebhookDelivery(orm, endpoint, { created_at: new Date(base + i), next_attempt_at: minutesAgo(1), ...over }));
    return out;
  }
  const enqueued = async (ids: string[]) =>
    (await sql(orm, 'select id from webhook_deliveries where id = any($1::uuid[]) and enqueued_at is not null', [ids])).map((r) => r.id);

  it('claims and marks started the oldest deliveries of each endpoint, up to its window', async () => {
    const a = await insertWebhookEndpoint(orm, org.id);
    const b = await insertWebhookEndpoint(orm, org.id);
    const da = await deliveries(a, 5, { run: 2, run_attempts: 3 });
    const db = await deliveries(b, 1);
    const claimed = await claimWebhookDeliveries(orm, 2, 100);
    assert.deepEqual(claimed.map((c) => c.id).sort(), [da[0].id, da[1].id, db[0].id].sort());
    assert.deepEqual((await enqueued([...da, ...db].map((d) => d.id))).sort(), [da[0].id, da[1].id, db[0].id].sort());
    const first = claimed.find((c) => c.id === da[0].id)!;
    assert.equal(first.run, 2);
    assert.equal(first.run_attempts, 3);
    assert.equal(first.organization_id, org.id);
    assert.ok(Math.abs(first.next_attempt_ms! - minutesAgo(1).getTime()) < 5_000);
  });

  it("an endpoint's runs still due take its window; once they are done (or wait for later) the next ones are claimed", async () => {
    const e = await insertWebhookEndpoint(orm, org.id);
    const d = await deliveries(e, 5);
    assert.equal((await claimWebhookDeliveries(orm, 2, 100)).length, 2);
    assert.deepEqual(await claimWebhookDeliveries(orm, 2, 100), [], 'the window is full');
    // One attempt done, one waiting for a retry in an hour: both leave the window.
    await sql(orm, "update webhook_deliveries set status = 'delivered' where id = $1", [d[0].id]);
    await sql(orm, "update webhook_deliveries set next_attempt_at = now() + interval '1 hour' where id = $1", [d[1].id]);
    assert.deepEqual((await claimWebhookDeliveries(orm, 2, 100)).map((c) => c.id).sort(), [d[2].id, d[3].id].sort());
  });

  it("one endpoint's backlog does not take another's room; `limit` bounds a whole claim", async () => {
    const slow = await insertWebhookEndpoint(orm, org.id);
    const other = await insertWebhookEndpoint(orm, org.id);
    await deliveries(slow, 4);
    assert.equal((await claimWebhookDeliveries(orm, 4, 100)).length, 4);
    await deliveries(slow, 4);
    const mine = await deliveries(other, 3);
    assert.deepEqual((await claimWebhookDeliveries(orm, 4, 100)).map((c) => c.id).sort(), mine.map((d) => d.id).sort());
    const more = await insertWebhookEndpoint(orm, org.id);
    await deliveries(more, 5);
    assert.equal((await claimWebhookDeliveries(orm, 10, 3)).length, 3);
  });

  it('a delivery marked long ago whose attempt is long overdue (its run was lost) is claimed again; a recent one is not', async () => {
    const e = await insertWebhookEndpoint(orm, org.id);
    const [lost] = await deliveries(e, 1, { enqueued_at: minutesAgo(20), next_attempt_at: minutesAgo(20) });
    const [recent] = await deliveries(e, 1, { enqueued_at: minutesAgo(20), next_attempt_at: minutesAgo(5) });
    const [done] = await deliveries(e, 1, { enqueued_at: minutesAgo(20), next_attempt_at: minutesAgo(20), status: 'failed' });
    const claimed = (await claimWebhookDeliveries(orm, 10, 100)).map((c) => c.id);
    assert.ok(claimed.includes(lost.id));
    assert.ok(!claimed.includes(recent.id));
    assert.ok(!claimed.includes(done.id));
    const [row] = await sql(orm, "select enqueued_at > now() - interval '1 minute' as fresh from webhook_deliveries where id = $1", [
      lost.id,
    ]);
    assert.equal(row.fresh, true, 'marked anew');
  });

  it('unclaim gives deliveries back for the next claim', async () => {
    const e = await insertWebhookEndpoint(orm, org.id);
    const [d] = await deliveries(e, 1);
    assert.deepEqual(
      (await claimWebhookDeliveries(orm, 5, 100)).map((c) => c.id),
      [d.id],
    );
    await unclaimWebhookDeliveries(orm, [d.id]);
    await unclaimWebhookDeliveries(orm, []);
    assert.deepEqual(await enqueued([d.id]), []);
    assert.deepEqual(
      (await claimWebhookDeliveries(orm, 5, 100)).map((c) => c.id),
      [d.id],
    );
  });

  it('race: concurrent dispatchers claim each delivery once', async () => {
    const all: Row[] = [];
    for (let i = 0; i < 3; i++) all.push(...(await deliveries(await insertWebhookEndpoint(orm, org.id), 10)));
    const results = await concurrently(5, () => claimWebhookDeliveries(orm, 100, 100));
    const ids = results.flat().map((c) => c.id);
    assert.equal(new Set(ids).size, ids.length, 'no delivery claimed twice');
    const rest = (await claimWebhookDeliveries(orm, 100, 100)).map((c) => c.id);
    assert.deepEqual([...ids, ...rest].sort(), all.map((d) => d.id).sort());
  });
});
