import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { sleep, waitFor } from '../support/wait';
import { nextUtcMidnight } from '../../core/limits/caps';

/** The daily caps as a user of the API sees them: 200s, parked mail with `waiting`, usage, warm-up, cancel. */
describe('API: daily send caps (parked mail, organization usage, domain warm-up)', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;

  before(async () => {
    env = await sharedService();
    t = await newTenant(env, { plan: 'free', warmup: true });
  });

  const send = (to: string) => t.call('POST', '/api/v1/emails', { body: { from: `app@${t.domain}`, to, subject: 'Capped', text: 'hi' } });
  const email = async (id: string) => (await t.call('GET', `/api/v1/emails/${id}`)).body;

  it('mail over the organization cap is accepted (200), stays queued with `waiting`, can be canceled and never leaves', async () => {
    const patch = await t.call('PATCH', '/api/v1/organization', { body: { daily_send_cap: 2 }, as: 'admin' });
    assert.equal(patch.status, 200, JSON.stringify(patch.body));
    assert.equal(patch.body.effective_daily_send_cap, 2);

    const stamp = Date.now();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await send(`capped-${stamp}-${i}@example.com`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      ids.push(res.body.id);
    }
    await waitFor(async () => (await email(ids[1])).last_event === 'sent' && (await email(ids[0])).last_event === 'sent', 'two sent');
    const parked = await waitFor(async () => {
      const e = await email(ids[2]);
      return e.waiting ? e : undefined;
    }, 'the third parked');
    assert.equal(parked.last_event, 'queued');
    assert.deepEqual(parked.waiting, { reason: 'organization_daily_cap', until: nextUtcMidnight(new Date()).toISOString(), reply: null });
    assert.equal((await email(ids[0])).waiting, null);

    const org = (await t.call('GET', '/api/v1/organization', { as: 'admin' })).body;
    assert.deepEqual(org.daily_usage.organization, { limit: 2, sent: 2 });
    assert.equal(org.daily_usage.platform.limit, 45_000);
    assert.ok(org.daily_usage.platform.sent >= 2);
    assert.deepEqual(
      org.daily_usage.domains.map((d: { name: string; warmup_stage: number; limit: number; sent: number }) => [
        d.name,
        d.warmup_stage,
        d.limit,
        d.sent,
      ]),
      [[t.domain, 1, 200, 2]],
    );

    const cancel = await t.call('POST', `/api/v1/emails/${ids[2]}/cancel`);
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
    assert.equal(cancel.body.status, 'canceled');
    const after = await email(ids[2]);
    assert.equal(after.last_event, 'canceled');
    assert.equal(after.waiting, null);
    // The outbox starts its workflow (which ends at once); the release never wakes it; the relay never sees it.
    env.service.capRelease.kick();
    await sleep(1500);
    assert.equal(env.sink.received.filter((r) => r.envelopeTo.some((x) => x.includes(`capped-${stamp}-2`))).length, 0);
    assert.equal((await email(ids[2])).last_event, 'canceled');
    assert.equal((await t.call('GET', '/api/v1/organization', { as: 'admin' })).body.daily_usage.organization.sent, 2);
  });

  it('test mail goes out whatever the caps', async () => {
    const res = await t.call('POST', '/api/v1/emails', {
      body: { from: `app@${t.domain}`, to: `free-${Date.now()}@example.com`, subject: 'Test', text: 'hi' },
      as: 'test',
    });
    assert.equal(res.status, 200);
    await waitFor(
      async () => (await t.call('GET', `/api/v1/emails/${res.body.id}`, { as: 'test' })).body.last_event === 'delivered',
      'delivered',
    );
  });

  it('the free plan cap can only be lowered; a service plan takes any value, 0 meaning none', async () => {
    const high = await t.call('PATCH', '/api/v1/organization', { body: { daily_send_cap: 101 }, as: 'admin' });
    assert.equal(high.status, 422);
    assert.equal(high.body.error.code, 'validation_error');
    const reset = await t.call('PATCH', '/api/v1/organization', { body: { daily_send_cap: null }, as: 'admin' });
    assert.equal(reset.body.effective_daily_send_cap, 100);
    assert.equal(reset.body.plan_daily_send_ceiling, 100);

    const std = await newTenant(env, { plan: 'standard' });
    const shown = (await std.call('GET', '/api/v1/organization', { as: 'admin' })).body;
    assert.equal(shown.effective_daily_send_cap, 20_000, 'blank means 20,000');
    assert.equal(shown.plan_daily_send_ceiling, null);
    const big = await std.call('PATCH', '/api/v1/organization', { body: { daily_send_cap: 50_000 }, as: 'admin' });
    assert.equal(big.status, 200);
    assert.equal(big.body.effective_daily_send_cap, 50_000);
    const none = await std.call('PATCH', '/api/v1/organization', { body: { daily_send_cap: 0 }, as: 'admin' });
    assert.equal(none.body.effective_daily_send_cap, null, '0 means no organization cap');
    assert.equal(none.body.daily_usage.organization.limit, null);
    const huge = await std.call('PATCH', '/api/v1/organization', { body: { daily_send_cap: 1e12 }, as: 'admin' });
    assert.equal(huge.status, 422);
  });

  it('a domain shows its warm-up: stage, daily limit and what it sent today', async () => {
    const res = await t.call('GET', `/api/v1/domains/${t.domainId}`, { as: 'admin' });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.warmup, { stage: 1, daily_limit: 200, sent_today: 2 });
    const list = await t.call('GET', '/api/v1/domains', { as: 'admin' });
    assert.deepEqual(list.body.data[0].warmup, res.body.warmup);
  });
});
