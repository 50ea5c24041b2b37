import assert from 'node:assert/strict';
import { DBOS } from '@dbos-inc/dbos-sdk';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { batchScenarios, type BatchScenario } from '../support/send-batch-scenarios';
import { SEND_BATCH_WORKFLOW, sendBatchActivityDefs, type SendBatchInput } from '../../workflows/send-batch';
import { waitFor } from '../support/wait';
import { runSvc, svcJson } from '../support/child';
import { readConfig } from '../../server/config';

/*
 * The embedded engine runs every message through SendBatch (worker/outbox.ts); SendEmail runs only
 * on Temporal with a confirmation window, so its scenarios (test/support/send-email-scenarios.ts)
 * are covered as Temporal replays only (test/workflows/temporal-replay.test.ts), no longer here.
 */

/**
 * One way of producing a SendBatch run on the embedded engine through the real API, relay and
 * database. `to(k)` is a fresh address for the batch's k-th message. Answers the ids it sent, in
 * the order the outbox puts them in the run (oldest due first).
 */
interface Driver {
  name: string;
  /** The scenario (send-batch-scenarios.ts) the run must follow. */
  scenario: string;
  drive(t: Tenant, env: TestEnv, to: (k: number) => string): Promise<string[]>;
}

const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString().replace('Z', '+00:00');

const ALONE = 'a message alone, sent in one pass';
/** How far ahead a driver schedules messages it acts on (cancels, changes) before the outbox starts their run. */
const AHEAD = 3;

const drivers: Driver[] = [
  { name: 'immediate send', scenario: ALONE, drive: async (t, _env, to) => [await send(t, to(0))] },
  {
    name: 'scheduled, then sent when due (the outbox holds it until then: no engine timer)',
    scenario: ALONE,
    drive: async (t, _env, to) => [await send(t, to(0), { scheduled_at: inSeconds(2) })],
  },
  {
    name: 'three sent in one API batch',
    scenario: 'all delivered in one pass',
    drive: async (t, _env, to) => sendBatch(t, [to(0), to(1), to(2)]),
  },
  {
    name: 'hard bounce (5xx for every recipient)',
    scenario: 'hard bounce: the pass settles the message as bounced',
    drive: async (t, env, to) => {
      env.sink.rules.set(to(0), { rcpt: 'reject', code: 550, message: '5.1.1 no such user' });
      return [await send(t, to(0))];
    },
  },
  {
    name: 'two scheduled for the same moment, the second canceled before it is due',
    scenario: 'some messages not claimed, the rest delivered',
    drive: async (t, _env, to) => {
      const at = inSeconds(AHEAD);
      const ids = [await send(t, to(0), { scheduled_at: at }), await send(t, to(1), { scheduled_at: at })];
      await cancel(t, ids[1]);
      return ids;
    },
  },
  {
    name: 'scheduled, then canceled: the run claims nothing',
    scenario: 'nothing claimed: the run ends without a pass',
    drive: async (t, _env, to) => {
      const id = await send(t, to(0), { scheduled_at: inSeconds(AHEAD) });
      await cancel(t, id);
      return [id];
    },
  },
  {
    name: "two in one API batch, the second's recipient refused once (4xx)",
    scenario: 'one message refused for now, retried alone after the backoff, then delivered',
    drive: async (t, env, to) => {
      env.sink.rules.set(to(1), { rcpt: 'tempfail', times: 1 });
      return sendBatch(t, [to(0), to(1)]);
    },
  },
  {
    name: 'recipient refused twice (4xx), then accepted',
    scenario: 'a message refused for now twice, then delivered',
    drive: async (t, env, to) => {
      env.sink.rules.set(to(0), { rcpt: 'tempfail', times: 2 });
      return [await send(t, to(0))];
    },
  },
  {
    name: "two scheduled for the same moment, the second's stored From no longer a single mailbox",
    scenario: 'a pass fails one message for good: failBatch, then the end',
    drive: async (t, env, to) => {
      const at = inSeconds(AHEAD);
      const ids = [await send(t, to(0), { scheduled_at: at }), await send(t, to(1), { scheduled_at: at })];
      // What no retry can fix (deliverBatch answers it in `failed`); the API never stores such a row.
      const changed = await env.service.db.orm.em
        .fork()
        .getConnection()
        .execute(`update emails set from_address = 'a@x.test, b@y.test' where id = ? and enqueued_at is null`, [ids[1]], 'run');
      assert.equal((changed as { affectedRows?: number }).affectedRows, 1, 'changed before the outbox started the run');
      return ids;
    },
  },
  {
    name: 'recipient refused (4xx) on every attempt',
    scenario: 'retries exhausted: four passes 30 s, 60 s, 120 s apart, then failBatch',
    drive: async (t, env, to) => {
      env.sink.rules.set(to(0), { rcpt: 'tempfail', times: 100 });
      return [await send(t, to(0))];
    },
  },
];

let tenant: Tenant;
async function send(t: Tenant, to: string, extra: object = {}): Promise<string> {
  const res = await t.call('POST', '/api/v1/emails', {
    body: { from: `Parity <parity@${t.domain}>`, to, subject: 'Parity', text: 'Same on both engines', ...extra },
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.id;
}

/** Several messages stored by one statement: the outbox sees them together and starts them as one run. */
async function sendBatch(t: Tenant, to: string[]): Promise<string[]> {
  const res = await t.call('POST', '/api/v1/emails/batch', {
    body: to.map((address) => ({ from: `Parity <parity@${t.domain}>`, to: address, subject: 'Parity', text: 'Same on both engines' })),
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return (res.body.data as { id: string }[]).map((d) => d.id);
}

async function cancel(t: Tenant, id: string): Promise<void> {
  const res = await t.call('POST', `/api/v1/emails/${id}/cancel`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
}

/** The SendBatch run the outbox started for `emailId` (its workflow id is `send-batch-<hash of its members>`). */
async function batchOf(emailId: string): Promise<{ workflowId: string; input: SendBatchInput }> {
  return waitFor(
    async () => {
      const runs = await DBOS.listWorkflows({ workflowName: SEND_BATCH_WORKFLOW, sortDesc: true, limit: 50, loadInput: true });
      const run = runs.find((r) => (r.input?.[0] as SendBatchInput | undefined)?.emailIds.includes(emailId));
      return run && { workflowId: run.workflowID, input: run.input![0] as SendBatchInput };
    },
    `a SendBatch run for ${emailId}`,
    20_000,
  );
}

async function workflowResult(workflowId: string): Promise<unknown> {
  const status = await waitFor(
    async () => {
      const s = await DBOS.getWorkflowStatus(workflowId);
      return s && ['SUCCESS', 'ERROR'].includes(s.status) ? s : undefined;
    },
    `workflow ${workflowId} to finish`,
    40_000,
  );
  assert.equal(status.status, 'SUCCESS', String(status.error));
  return status.output;
}

async function lastEvent(t: Tenant, id: string): Promise<string> {
  return (await t.call('GET', `/api/v1/emails/${id}`)).body.last_event;
}

describe('Engine parity: the SendBatch scenarios, run for real on the embedded engine', function () {
  this.timeout(60_000);
  let env: TestEnv;

  before(async () => {
    env = await sharedService();
    tenant = await newTenant(env);
  });

  it('has an embedded driver for every scenario, and every driver names a scenario', () => {
    const names = new Set(batchScenarios.map((s) => s.name));
    for (const d of drivers) assert.ok(names.has(d.scenario), `${d.name}: no scenario ${d.scenario}`);
    assert.deepEqual([...new Set(drivers.map((d) => d.scenario))].sort(), [...names].sort());
  });

  drivers.forEach((d, i) => {
    const s: BatchScenario = batchScenarios.find((x) => x.name === d.scenario)!;
    it(`${d.name}: ${s.name}`, async () => {
      const stamp = Date.now();
      const ids = await d.drive(tenant, env, (k) => `parity-${i}-${k}-${stamp}@example.com`);
      const batch = await batchOf(ids[0]);
      // The run holds exactly this driver's messages, in the order the scenario lists them.
      assert.deepEqual(batch.input.emailIds, ids);
      assert.equal(ids.length, s.statuses.length);
      assert.deepEqual(await workflowResult(batch.workflowId), s.result);

      const statuses = await Promise.all(ids.map((id) => lastEvent(tenant, id)));
      assert.deepEqual(statuses, s.statuses);
      // A claimed message names the run that owns it; one canceled before the claim names none.
      const rows = await env.service.db.orm.em
        .fork()
        .getConnection()
        .execute<{ id: string; claimed_by: string | null }[]>(`select id, claimed_by from emails where id = any(?::uuid[])`, [
          `{${ids.join(',')}}`,
        ]);
      const owner = new Map(rows.map((r) => [r.id, r.claimed_by]));
      assert.deepEqual(
        ids.map((id) => owner.get(id)),
        s.statuses.map((st) => (st === 'canceled' ? null : batch.workflowId)),
      );

      const known = new Set(Object.keys(sendBatchActivityDefs));
      const steps = (await DBOS.listWorkflowSteps(batch.workflowId)) ?? [];
      assert.deepEqual(
        steps.map((st) => st.name).filter((n) => known.has(n)),
        s.embedded?.activities ?? s.activities,
        s.embedded?.why,
      );
      // The backoff is a durable sleep between passes, doubling from RETRY_BASE_SECONDS (1 s in tests).
      const names = steps.map((st) => st.name);
      const passes = steps.filter((st) => st.name === 'deliverBatch').map((st) => st.startedAtEpochMs!);
      assert.equal(names.filter((n) => n === 'DBOS.sleep').length, Math.max(0, passes.length - 1), names.join(', '));
      for (let k = 1; k < passes.length; k++) {
        const wait = batch.input.retryBaseSeconds * 1000 * 2 ** (k - 1);
        assert.ok(
          passes[k] - passes[k - 1] >= wait,
          `pass ${k + 1} began ${passes[k] - passes[k - 1]} ms after pass ${k}, before ${wait} ms`,
        );
      }
    });
  });

  it('svc email close-unconfirmed closes a sent message as unconfirmed (the embedded stand-in for the confirmation window)', async () => {
    const id = await send(tenant, `parity-close-${Date.now()}@example.com`);
    await waitFor(async () => (await lastEvent(tenant, id)) === 'sent', `email ${id} to be sent`);
    const closed = await svcJson(['email', 'close-unconfirmed', id], { DATABASE_URL: env.service.db.url });
    assert.deepEqual(closed, { id, object: 'email', status: 'unconfirmed' });
    assert.equal(await lastEvent(tenant, id), 'unconfirmed');
  });

  it('svc email close-unconfirmed refuses a message that is not sent, and changes nothing', async () => {
    const to = `parity-bounce-${Date.now()}@example.com`;
    env.sink.rules.set(to, { rcpt: 'reject', code: 550, message: '5.1.1 no such user' });
    const id = await send(tenant, to);
    await waitFor(async () => (await lastEvent(tenant, id)) === 'bounced', 'bounce');
    const child = runSvc(['email', 'close-unconfirmed', id], { DATABASE_URL: env.service.db.url });
    assert.equal(await child.exited, 1);
    assert.match(child.output(), /not_closable: email \S+ is bounced/);
    assert.equal(await lastEvent(tenant, id), 'bounced');
  });

  it('svc worker needs ENGINE=temporal: the embedded engine runs inside svc start', async () => {
    const child = runSvc(['worker'], { DATABASE_URL: env.service.db.url });
    assert.equal(await child.exited, 2);
    assert.match(child.output(), /needs ENGINE=temporal/);
  });

  it('keeps the confirmation window Temporal-only: the embedded engine refuses it at boot', () => {
    assert.throws(() => readConfig({ CONFIRMATION_WINDOW_HOURS: '24' }), /needs ENGINE=temporal/);
    assert.equal(readConfig({ ENGINE: 'temporal', CONFIRMATION_WINDOW_HOURS: '24' }).temporal!.confirmationWindowMs, 24 * 3_600_000);
  });
});
