import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { requeueWebhookDeliveries } from '../../db/sql/requeue-webhook-deliveries';
import { insertOrganization, insertWebhookDelivery, insertWebhookEndpoint, openTestDb, sql, type Row } from '../support/db-fixtures';
import { releasedTogether, typed, values } from '../support/db-fixtures-rz';

describe('db/sql/requeue-webhook-deliveries: the next run of a delivery (retry one, recover failed ones)', function () {
  let orm: Orm;
  let org: Row;
  let other: Row;

  before(async () => {
    orm = await openTestDb('db_requeue_webhooks');
    org = await insertOrganization(orm);
    other = await insertOrganization(orm);
  });
  after(async () => orm.close());

  const requeue = (where: Parameters<typeof requeueWebhookDeliveries>[1]) => requeueWebhookDeliveries(orm.em.fork(), where);
  const read = async (id: string) =>
    (
      await sql(
        orm,
        `select run, run_attempts, attempts, status, enqueued_at, next_attempt_at <= now() and next_attempt_at > now() - interval '1 minute' as due_now
           from webhook_deliveries where id = $1`,
        [id],
      )
    )[0];
  const failed = (endpoint: Row, over: Row = {}) =>
    insertWebhookDelivery(orm, typed(endpoint), {
      status: 'failed',
      run: 2,
      run_attempts: 6,
      attempts: 9,
      enqueued_at: new Date(),
      next_attempt_at: null,
      ...over,
    });

  it('one delivery: the next run, pending and due now, not started; answers the run it had', async () => {
    const ep = await insertWebhookEndpoint(orm, org.id);
    const d = await failed(ep);
    const rows = await requeue({ endpointId: ep.id, organizationId: org.id, deliveryId: d.id });
    assert.deepEqual(
      rows.map((r) => ({ id: r.id, previous_run: r.previous_run })),
      [{ id: d.id, previous_run: 2 }],
    );
    assert.deepEqual(await read(d.id), { run: 3, run_attempts: 0, attempts: 9, status: 'pending', enqueued_at: null, due_now: true });
  });

  it('never another organization’s delivery, nor one of another endpoint', async () => {
    const ep = await insertWebhookEndpoint(orm, org.id);
    const ep2 = await insertWebhookEndpoint(orm, org.id);
    const d = await failed(ep);
    assert.deepEqual(await requeue({ endpointId: ep.id, organizationId: other.id, deliveryId: d.id }), []);
    assert.deepEqual(await requeue({ endpointId: ep2.id, organizationId: org.id, deliveryId: d.id }), []);
    assert.equal((await read(d.id)).run, 2);
    assert.equal((await read(d.id)).status, 'failed');
  });

  it('recover: every failed delivery of the endpoint created since the time, and no other', async () => {
    const ep = await insertWebhookEndpoint(orm, org.id);
    const ep2 = await insertWebhookEndpoint(orm, org.id);
    const since = new Date('2031-09-01T00:00:00.000Z');
    const recent = await failed(ep, { created_at: new Date('2031-09-02T00:00:00.000Z') });
    const old = await failed(ep, { created_at: new Date('2031-08-31T00:00:00.000Z') });
    const pending = await insertWebhookDelivery(orm, typed(ep), { created_at: new Date('2031-09-02T00:00:00.000Z') });
    const succeeded = await failed(ep, { status: 'succeeded', created_at: new Date('2031-09-02T00:00:00.000Z') });
    const otherEndpoint = await failed(ep2, { created_at: new Date('2031-09-02T00:00:00.000Z') });
    const rows = await requeue({ endpointId: ep.id, organizationId: org.id, failedSince: since });
    assert.deepEqual(
      rows.map((r) => r.id),
      [recent.id],
    );
    for (const d of [old, otherEndpoint]) assert.equal((await read(d.id)).status, 'failed');
    assert.equal((await read(pending.id)).run, 1);
    assert.equal((await read(succeeded.id)).status, 'succeeded');
  });

  /** The race: two retries of one delivery at once (two clicks). Each starts its own run: none is lost. */
  it('race: concurrent retries of one delivery each start a run, from the run the other left', async () => {
    const ep = await insertWebhookEndpoint(orm, org.id);
    const d = await failed(ep, { run: 1 });
    const results = values(
      await releasedTogether(
        orm,
        [['select 1 from webhook_deliveries where id = $1 for update', [d.id]]],
        [1, 2, 3].map(() => () => requeue({ endpointId: ep.id, organizationId: org.id, deliveryId: d.id })),
      ),
    );
    assert.deepEqual(results.map((r) => r[0].previous_run).sort(), [1, 2, 3]);
    assert.equal((await read(d.id)).run, 4);
  });
});
