import assert from 'node:assert/strict';
import { DBOS } from '@dbos-inc/dbos-sdk';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { scenarios } from '../support/send-email-scenarios';
import { sendEmailActivityRetry } from '../../workflows/send-email';
import { waitFor } from '../support/wait';
import { runSvc, svcJson } from '../support/child';
import { readConfig } from '../../server/config';

/** Drives one scenario on the embedded engine through the real API, relay and database. */
type Driver = (t: Tenant, env: TestEnv, to: string) => Promise<string>;

const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString().replace('Z', '+00:00');

const drivers: Record<string, Driver> = {
  'immediate send': async (t, _env, to) => send(t, to),
  'scheduled, then sent when the timer fires': async (t, _env, to) => send(t, to, { scheduled_at: inSeconds(2) }),
  'scheduled, then canceled by signal': async (t, _env, to) => {
    const id = await send(t, to, { scheduled_at: inSeconds(2) });
    assert.equal((await t.call('POST', `/api/v1/emails/${id}/cancel`)).status, 200);
    return id;
  },
  'transient failure retried, then delivered': async (t, env, to) => {
    env.sink.rules.set(to, { rcpt: 'tempfail', times: 2 });
    return send(t, to);
  },
  // On the embedded engine the same path (deliver fails for good, then failDelivery) comes from
  // transient failures that outlast the 4 attempts.
  'permanent failure': async (t, env, to) => {
    env.sink.rules.set(to, { rcpt: 'tempfail', times: 100 });
    return send(t, to);
  },
  'hard bounce (5xx for every recipient)': async (t, env, to) => {
    env.sink.rules.set(to, { rcpt: 'reject', code: 550, message: '5.1.1 no such user' });
    return send(t, to);
  },
  'sent, then closed as unconfirmed by the operator signal': async (t, env, to) => {
    const id = await send(t, to);
    await workflowResult(id);
    const closed = await svcJson(['email', 'close-unconfirmed', id], { DATABASE_URL: env.service.db.url });
    assert.deepEqual(closed, { id, object: 'email', status: 'unconfirmed' });
    return id;
  },
};

let tenant: Tenant;
async function send(t: Tenant, to: string, extra: object = {}): Promise<string> {
  const res = await t.call('POST', '/api/v1/emails', {
    body: { from: `Parity <parity@${t.domain}>`, to, subject: 'Parity', text: 'Same on both engines', ...extra },
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.id;
}

async function workflowResult(id: string): Promise<unknown> {
  const status = await waitFor(
    async () => {
      const s = await DBOS.getWorkflowStatus(id);
      return s && ['SUCCESS', 'ERROR'].includes(s.status) ? s : undefined;
    },
    `workflow ${id} to finish`,
    40_000,
  );
  assert.equal(status.status, 'SUCCESS', String(status.error));
  return status.output;
}

describe('Engine parity: the replay scenarios, run for real on the embedded engine', function () {
  this.timeout(60_000);
  let env: TestEnv;

  before(async () => {
    env = await sharedService();
    tenant = await newTenant(env);
  });

  it('has an embedded driver for every scenario', () => {
    assert.deepEqual(Object.keys(drivers).sort(), scenarios.map((s) => s.name).sort());
  });

  scenarios.forEach((s, i) => {
    it(`reaches the same end state: ${s.name}`, async () => {
      const to = `parity-${i}-${Date.now()}@example.com`;
      const id = await drivers[s.name](tenant, env, to);
      await workflowResult(id);
      const email = await waitFor(async () => {
        const got = await tenant.call('GET', `/api/v1/emails/${id}`);
        return got.body.last_event === s.status ? got.body : undefined;
      }, `email ${id} to be ${s.status}`);
      assert.equal(email.last_event, s.status);
      const known = new Set(Object.keys(sendEmailActivityRetry));
      const steps = ((await DBOS.listWorkflowSteps(id)) ?? []).map((st) => st.name).filter((n) => known.has(n));
      assert.deepEqual(steps, s.embedded?.activities ?? s.activities, s.embedded?.why);
    });
  });

  it('svc email close-unconfirmed refuses a message that is not sent, and changes nothing', async () => {
    const to = `parity-bounce-${Date.now()}@example.com`;
    env.sink.rules.set(to, { rcpt: 'reject', code: 550, message: '5.1.1 no such user' });
    const id = await send(tenant, to);
    await waitFor(async () => (await tenant.call('GET', `/api/v1/emails/${id}`)).body.last_event === 'bounced', 'bounce');
    const child = runSvc(['email', 'close-unconfirmed', id], { DATABASE_URL: env.service.db.url });
    assert.equal(await child.exited, 1);
    assert.match(child.output(), /not_closable: email \S+ is bounced/);
    assert.equal((await tenant.call('GET', `/api/v1/emails/${id}`)).body.last_event, 'bounced');
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
