import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { createOrganization, createKey } from '../../core/provisioning';
import { request } from '../support/http';

describe('API: organization settings and the audit log', function () {
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    // The free plan: its ceiling is what these tests check against.
    t = await newTenant(env, { plan: 'free' });
    other = await newTenant(env, { plan: 'free' });
  });

  it('updates name, postal address and daily cap, and records who did it', async () => {
    const res = await t.call('PATCH', '/api/v1/organization', {
      as: 'admin',
      body: { name: 'Acme Mail', postal_address: '1 Main St\nSpringfield', daily_send_cap: 40 },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.name, 'Acme Mail');
    assert.equal(res.body.postal_address, '1 Main St\nSpringfield');
    assert.equal(res.body.daily_send_cap, 40);
    assert.equal(res.body.effective_daily_send_cap, 40);
    const got = await t.call('GET', '/api/v1/organization', { as: 'admin' });
    assert.equal(got.body.name, 'Acme Mail');
    const log = await t.call('GET', '/api/v1/audit-log?limit=1', { as: 'admin' });
    assert.equal(log.body.data[0].action, 'organization.updated');
    assert.deepEqual(log.body.data[0].target, { type: 'organization', id: t.orgId });
    assert.deepEqual(log.body.data[0].details.changes, { name: 'Acme Mail', postal_address: '1 Main St\nSpringfield', daily_send_cap: 40 });
    const keys = await t.call('GET', '/api/v1/keys', { as: 'admin' });
    const admin = keys.body.data.find((k: { permission: string }) => k.permission === 'admin');
    assert.equal(log.body.data[0].key_id, admin.id, 'the entry names the key');
    // Clearing: null address, 0 cap means the plan's ceiling.
    const cleared = await t.call('PATCH', '/api/v1/organization', { as: 'admin', body: { postal_address: null, daily_send_cap: 0 } });
    assert.equal(cleared.body.postal_address, null);
    assert.equal(cleared.body.effective_daily_send_cap, cleared.body.plan_daily_send_ceiling);
  });

  it('lets a daily cap only lower the plan ceiling, refuses bad input and writes nothing then', async () => {
    const before = await t.call('GET', '/api/v1/organization', { as: 'admin' });
    const auditBefore = (await t.call('GET', '/api/v1/audit-log', { as: 'admin' })).body.data[0]?.id;
    const bad: unknown[] = [
      { daily_send_cap: before.body.plan_daily_send_ceiling + 1 },
      { daily_send_cap: -1 },
      { daily_send_cap: 1.5 },
      { daily_send_cap: '10' },
      { name: '' },
      { name: 'two\nlines' },
      { name: 'x'.repeat(201) },
      { postal_address: 'x'.repeat(501) },
      { plan: 'standard' },
      [],
    ];
    for (const body of bad) {
      const res = await t.call('PATCH', '/api/v1/organization', { as: 'admin', body });
      assert.equal(res.status, 422, `${JSON.stringify(body)} → ${res.status}`);
      assert.equal(res.body.error.code, 'validation_error');
    }
    const after = await t.call('GET', '/api/v1/organization', { as: 'admin' });
    assert.deepEqual(after.body, before.body);
    assert.equal((await t.call('GET', '/api/v1/audit-log', { as: 'admin' })).body.data[0]?.id, auditBefore);
  });

  it('applies the free plan ceiling of 100 per day', async () => {
    const org = await createOrganization(env.service.db.orm, 'Free tier', 'free');
    const { token } = await createKey(env.service.db.orm, org.id, { name: 'admin', permission: 'admin', mode: 'live', rateLimit: 1000 });
    const call = (body: unknown) => request(env.url, 'PATCH', '/api/v1/organization', { token, body });
    assert.equal((await call({ daily_send_cap: 101 })).status, 422);
    const ok = await call({ daily_send_cap: 100 });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.plan_daily_send_ceiling, 100);
  });

  it('pages the audit log newest first with a cursor, per organization only', async () => {
    for (let i = 0; i < 5; i++)
      await t.call('POST', '/api/v1/keys', { as: 'admin', body: { name: `audited-${i}`, permission: 'send', mode: 'live' } });
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const res = await t.call('GET', `/api/v1/audit-log?limit=2${cursor ? `&cursor=${cursor}` : ''}`, { as: 'admin' });
      assert.equal(res.status, 200);
      seen.push(...res.body.data.map((e: { id: string }) => e.id));
      cursor = res.body.next_cursor;
      pages += 1;
    } while (cursor && pages < 50);
    assert.equal(new Set(seen).size, seen.length, 'no duplicates');
    const all = (await t.call('GET', '/api/v1/audit-log?limit=100', { as: 'admin' })).body.data;
    assert.deepEqual(
      seen,
      all.map((e: { id: string }) => e.id),
      'pages join up to the whole log, newest first',
    );
    const created = all
      .filter((e: { action: string }) => e.action === 'key.created')
      .map((e: { details: { name: string } }) => e.details.name);
    assert.deepEqual(created.slice(0, 5), ['audited-4', 'audited-3', 'audited-2', 'audited-1', 'audited-0']);
    const theirs = (await other.call('GET', '/api/v1/audit-log?limit=100', { as: 'admin' })).body.data;
    assert.ok(!theirs.some((e: { id: string }) => seen.includes(e.id)), 'another organization never sees these entries');
    const bad = await t.call('GET', '/api/v1/audit-log?cursor=nope!', { as: 'admin' });
    assert.equal(bad.status, 422);
    assert.equal(bad.body.error.code, 'invalid_cursor');
    assert.equal((await t.call('GET', '/api/v1/audit-log?limit=0', { as: 'admin' })).body.error.code, 'validation_error');
    assert.equal(
      (await t.call('GET', '/api/v1/audit-log?kind=key.created', { as: 'admin' })).body.error.code,
      'validation_error',
      'unknown parameters are refused, not ignored',
    );
    const onlyCreated = (await t.call('GET', '/api/v1/audit-log?action=key.created&limit=100', { as: 'admin' })).body.data;
    assert.ok(onlyCreated.length >= 5 && onlyCreated.every((e: { action: string }) => e.action === 'key.created'), 'filtered by action');
    const byKey = (await t.call('GET', `/api/v1/audit-log?actor=key:${onlyCreated[0].key_id}&limit=100`, { as: 'admin' })).body.data;
    assert.ok(
      byKey.length > 0 &&
        byKey.every((e: { key_id: string; actor: string }) => e.key_id === onlyCreated[0].key_id && e.actor === `key:${e.key_id}`),
    );
  });
});
