import assert from 'node:assert/strict';
import type { Orm } from '../../db/orm';
import { requeueWebhookDeliveries } from '../../db/sql/requeue-webhook-deliveries';
import { loadWebhookAttempt, recordWebhookAttempt, type AttemptRecord, type RecordedAttempt } from '../../db/sql/webhook-attempt';
import {
  insertOrganization,
  insertWebhookDelivery,
  insertWebhookEndpoint,
  insertWebhookEvent,
  ms,
  openTestDb,
  sql,
  type Row,
} from '../support/db-fixtures';
import { Gate, typed, waitForLockWaiters } from '../support/db-fixtures-rz';

describe('db/sql/webhook-attempt: what an attempt needs, and its record', function () {
  let orm: Orm;
  let org: Row;
  const at = new Date('2031-10-01T12:00:00.000Z');
  const DAY = 86_400_000;

  before(async () => {
    orm = await openTestDb('db_webhook_attempt');
    org = await insertOrganization(orm);
  });
  after(async () => orm.close());

  /** A delivery claimed by a run (enqueued), of an endpoint of its own unless given. */
  async function delivery(over: Row = {}, endpoint?: Row): Promise<{ endpoint: Row; d: Row }> {
    const ep = endpoint ?? (await insertWebhookEndpoint(orm, org.id));
    const d = await insertWebhookDelivery(orm, typed(ep), { enqueued_at: new Date(), next_attempt_at: new Date(), ...over });
    return { endpoint: ep, d };
  }
  /** The attempt's record, as RecordedAttempt declares it (the statement's other output columns left out). */
  const attempt = async (d: Row, over: Partial<AttemptRecord> = {}): Promise<RecordedAttempt | null> => {
    const r = await recordWebhookAttempt(orm, {
      deliveryId: d.id,
      run: d.run,
      attempted: true,
      succeeded: false,
      gone: false,
      statusCode: 500,
      error: null,
      response: 'oops',
      retryInMs: 60_000,
      at,
      ...over,
    });
    return (
      r && {
        status: r.status,
        next_attempt_ms: r.next_attempt_ms,
        disabled: r.disabled,
        endpoint_id: r.endpoint_id,
        handed_back: r.handed_back,
      }
    );
  };
  const ok = { succeeded: true, statusCode: 200, response: 'ok' };
  const deliveryRow = async (id: string) =>
    (
      await sql(
        orm,
        'select status, attempts, run_attempts, last_status_code, last_error, last_response, next_attempt_at, enqueued_at from webhook_deliveries where id = $1',
        [id],
      )
    )[0];
  const endpointRow = async (id: string) =>
    (await sql(orm, 'select enabled, disabled_reason, failing_since, updated_at from webhook_endpoints where id = $1', [id]))[0];
  const disabledAudits = (endpointId: string) =>
    sql(orm, `select details from audit_log where action = 'webhook.disabled' and target_id = $1`, [endpointId]);

  describe('loadWebhookAttempt', () => {
    it('answers the delivery’s state, its endpoint and the event body', async () => {
      const ep = await insertWebhookEndpoint(orm, org.id, { url: 'https://hooks.example.test/a', secret_enc: 'enc-current' });
      const ev = await insertWebhookEvent(orm, org.id, { payload: { type: 'email.sent', data: { id: 'x' } } });
      const { d } = await delivery({ event_id: ev.id, run: 3, run_attempts: 2 }, ep);
      assert.deepEqual(await loadWebhookAttempt(orm, d.id), {
        status: 'pending',
        run: 3,
        run_attempts: 2,
        endpoint_id: ep.id,
        url: 'https://hooks.example.test/a',
        enabled: true,
        secret_enc: 'enc-current',
        previous_secret_enc: null,
        body: '{"type":"email.sent","data":{"id":"x"}}',
      });
    });

    it('the rotated-out secret while it still signs, not after', async () => {
      const signing = await insertWebhookEndpoint(orm, org.id, {
        previous_secret_enc: 'enc-old',
        previous_secret_until: new Date(Date.now() + DAY),
      });
      const expired = await insertWebhookEndpoint(orm, org.id, {
        previous_secret_enc: 'enc-old',
        previous_secret_until: new Date(Date.now() - 1000),
      });
      assert.equal((await loadWebhookAttempt(orm, (await delivery({}, signing)).d.id))?.previous_secret_enc, 'enc-old');
      assert.equal((await loadWebhookAttempt(orm, (await delivery({}, expired)).d.id))?.previous_secret_enc, null);
    });

    it('null when the delivery (or its endpoint) is gone', async () => {
      const { endpoint, d } = await delivery();
      await sql(orm, 'delete from webhook_endpoints where id = $1', [endpoint.id]);
      assert.equal(await loadWebhookAttempt(orm, d.id), null);
    });
  });

  describe('recordWebhookAttempt', () => {
    it('a success on a healthy endpoint: succeeded; the endpoint row is not touched', async () => {
      const { endpoint, d } = await delivery();
      const before = await endpointRow(endpoint.id);
      const r = await attempt(d, ok);
      assert.deepEqual(r, { status: 'succeeded', next_attempt_ms: null, disabled: null, endpoint_id: endpoint.id, handed_back: false });
      const row = await deliveryRow(d.id);
      assert.deepEqual(
        [row.status, row.attempts, row.run_attempts, row.last_status_code, row.last_response, row.next_attempt_at],
        ['succeeded', 1, 1, 200, 'ok', null],
      );
      assert.deepEqual(await endpointRow(endpoint.id), before);
    });

    it('a failure with attempts left: pending, next attempt reckoned from the attempt’s time; the endpoint starts failing then', async () => {
      const { endpoint, d } = await delivery();
      const r = await attempt(d, { error: 'timeout', statusCode: null, response: null });
      assert.equal(r?.status, 'pending');
      assert.equal(r?.next_attempt_ms, at.getTime() + 60_000);
      assert.equal(r?.handed_back, false);
      const row = await deliveryRow(d.id);
      assert.deepEqual([row.attempts, row.last_error, ms(row.next_attempt_at)], [1, 'timeout', at.getTime() + 60_000]);
      assert.equal(ms((await endpointRow(endpoint.id)).failing_since), at.getTime());
      // A later failure keeps the streak's start; a success ends it.
      await attempt(d, { at: new Date(at.getTime() + DAY) });
      assert.equal(ms((await endpointRow(endpoint.id)).failing_since), at.getTime());
      await attempt(d, ok);
      assert.equal((await endpointRow(endpoint.id)).failing_since, null);
    });

    it('the last attempt failing: failed, nothing scheduled', async () => {
      const { d } = await delivery();
      const r = await attempt(d, { retryInMs: null });
      assert.deepEqual([r?.status, r?.next_attempt_ms, r?.disabled], ['failed', null, null]);
    });

    it('410 Gone: failed, and the endpoint disabled with an audit entry', async () => {
      const { endpoint, d } = await delivery();
      const r = await attempt(d, { gone: true, statusCode: 410 });
      assert.deepEqual([r?.status, r?.disabled], ['failed', 'gone']);
      const ep = await endpointRow(endpoint.id);
      assert.deepEqual([ep.enabled, ep.disabled_reason], [false, 'gone']);
      assert.deepEqual(await disabledAudits(endpoint.id), [{ details: { reason: 'gone' } }]);
    });

    it('failing for five days: the next failure disables the endpoint; a shorter streak does not', async () => {
      const old = await delivery({}, await insertWebhookEndpoint(orm, org.id, { failing_since: new Date(at.getTime() - 5 * DAY - 1000) }));
      const young = await delivery({}, await insertWebhookEndpoint(orm, org.id, { failing_since: new Date(at.getTime() - 4 * DAY) }));
      assert.equal((await attempt(old.d))?.disabled, 'failing');
      assert.deepEqual(
        [(await endpointRow(old.endpoint.id)).enabled, (await endpointRow(old.endpoint.id)).disabled_reason],
        [false, 'failing'],
      );
      assert.equal((await attempt(young.d))?.disabled, null);
      assert.equal((await endpointRow(young.endpoint.id)).enabled, true);
      assert.deepEqual(await disabledAudits(young.endpoint.id), []);
    });

    it('no POST made (endpoint disabled): counts in the run, not as an attempt, and leaves the endpoint alone', async () => {
      const { endpoint, d } = await delivery({}, await insertWebhookEndpoint(orm, org.id, { enabled: false, disabled_reason: 'manual' }));
      const before = await endpointRow(endpoint.id);
      const r = await attempt(d, { attempted: false, statusCode: null, response: null, retryInMs: null });
      assert.deepEqual([r?.status, r?.disabled], ['failed', null]);
      const row = await deliveryRow(d.id);
      assert.deepEqual([row.attempts, row.run_attempts], [0, 1]);
      assert.deepEqual(await endpointRow(endpoint.id), before);
    });

    it('a batch’s first attempt that failed with attempts left goes back to the dispatcher; one that succeeded does not', async () => {
      const back = await delivery();
      const r = await attempt(back.d, { handBack: true });
      assert.deepEqual([r?.status, r?.handed_back], ['pending', true]);
      assert.equal((await deliveryRow(back.d.id)).enqueued_at, null);
      const done = await delivery();
      const s = await attempt(done.d, { ...ok, handBack: true });
      assert.deepEqual([s?.status, s?.handed_back], ['succeeded', false]);
      assert.ok((await deliveryRow(done.d.id)).enqueued_at);
    });

    it('records nothing for a superseded run or a delivery no longer pending', async () => {
      const { d } = await delivery({ run: 2 });
      assert.equal(await attempt({ ...d, run: 1 }, ok), null);
      assert.deepEqual([(await deliveryRow(d.id)).status, (await deliveryRow(d.id)).run_attempts], ['pending', 0]);
      await attempt(d, ok);
      assert.equal(await attempt(d, { retryInMs: null }), null);
      assert.equal((await deliveryRow(d.id)).status, 'succeeded');
    });

    /**
     * The race with a manual retry: the attempt of run 1 and the retry (run 2) of one delivery at
     * once, released in a known order. The attempt counts only if it went first; either way the
     * delivery ends in run 2, pending, and the run-1 result does not overwrite it.
     */
    for (const first of ['attempt', 'retry'] as const) {
      it(`race: an attempt and a retry of one delivery, ${first} first`, async () => {
        const { endpoint, d } = await delivery();
        const gate = await Gate.hold(orm, ['select 1 from webhook_deliveries where id = $1 for update', [d.id]]);
        const record = () => attempt(d, ok);
        const retry = () => requeueWebhookDeliveries(orm.em.fork(), { endpointId: endpoint.id, organizationId: org.id, deliveryId: d.id });
        let recorded: ReturnType<typeof record>;
        let retried: ReturnType<typeof retry>;
        try {
          if (first === 'attempt') {
            recorded = record();
            await waitForLockWaiters(orm, 1);
            retried = retry();
          } else {
            retried = retry();
            await waitForLockWaiters(orm, 1);
            recorded = record();
          }
          await waitForLockWaiters(orm, 2);
        } finally {
          await gate.commit();
        }
        const [r, q] = await Promise.all([recorded!, retried!]);
        assert.deepEqual(
          q.map((x) => x.previous_run),
          [1],
        );
        if (first === 'attempt') assert.equal(r?.status, 'succeeded');
        else assert.equal(r, null, 'run 1 was superseded before its record');
        const [row] = await sql(orm, 'select run, status, run_attempts from webhook_deliveries where id = $1', [d.id]);
        assert.deepEqual(row, { run: 2, status: 'pending', run_attempts: 0 });
      });
    }

    /** Failures of several deliveries of one healthy endpoint at once: the streak starts at the first one's time, once. */
    it('race: concurrent failures on one endpoint start its failure streak once, at the first one’s time', async () => {
      const endpoint = await insertWebhookEndpoint(orm, org.id);
      const a = (await delivery({}, endpoint)).d;
      const b = (await delivery({}, endpoint)).d;
      const gate = await Gate.hold(orm, ['select 1 from webhook_endpoints where id = $1 for update', [endpoint.id]]);
      let ra: ReturnType<typeof attempt>;
      let rb: ReturnType<typeof attempt>;
      try {
        ra = attempt(a, { at });
        await waitForLockWaiters(orm, 1);
        rb = attempt(b, { at: new Date(at.getTime() + 1000) });
        await waitForLockWaiters(orm, 2);
      } finally {
        await gate.commit();
      }
      await Promise.all([ra!, rb!]);
      assert.equal(ms((await endpointRow(endpoint.id)).failing_since), at.getTime());
    });

    /**
     * Two deliveries of one endpoint answered 410 at once: the endpoint is disabled, and the
     * disabling is the act of one attempt: one audit entry, one attempt reporting it.
     */
    it('race: concurrent 410s on one endpoint disable it once (one audit entry, one attempt reports it)', async () => {
      const endpoint = await insertWebhookEndpoint(orm, org.id);
      const ds = [];
      for (let i = 0; i < 3; i++) ds.push((await delivery({}, endpoint)).d);
      const gate = await Gate.hold(orm, ['select 1 from webhook_endpoints where id = $1 for update', [endpoint.id]]);
      let running: Promise<unknown>[];
      try {
        running = ds.map((d) => attempt(d, { gone: true, statusCode: 410 }));
        await waitForLockWaiters(orm, ds.length);
      } finally {
        await gate.commit();
      }
      const results = (await Promise.all(running!)) as Awaited<ReturnType<typeof attempt>>[];
      assert.ok(results.every((r) => r?.status === 'failed'));
      const ep = await endpointRow(endpoint.id);
      assert.deepEqual([ep.enabled, ep.disabled_reason], [false, 'gone']);
      assert.equal((await disabledAudits(endpoint.id)).length, 1, 'one audit entry for one disabling');
      assert.equal(results.filter((r) => r?.disabled !== null).length, 1, JSON.stringify(results.map((r) => r?.disabled)));
    });
  });
});
