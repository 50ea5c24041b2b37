import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { request } from '../support/http';
import { waitFor } from '../support/wait';
import { createDomain, createKey } from '../../core/provisioning';

describe('API: key scope, header key limits, recipients and schedules', function () {
  let env: TestEnv;
  let t: Tenant;

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    t = await newTenant(env);
  });

  it('a domain-restricted key sends only from its domains and sees only their messages', async () => {
    const orm = env.service.db.orm;
    const own = await createDomain(orm, t.orgId, `own-${Date.now()}.example.test`, { verified: true });
    const { token } = await createKey(orm, t.orgId, { name: 'restricted', permission: 'send', mode: 'live', domainIds: [own.id] });
    const call = (method: string, path: string, body?: unknown) => request(env.url, method, path, { token, body });

    const mine = await call('POST', '/api/v1/emails', { from: `app@${own.name}`, to: 'a@example.com', subject: 's', text: 't' });
    assert.equal(mine.status, 200);
    const foreign = await call('POST', '/api/v1/emails', { from: `app@${t.domain}`, to: 'a@example.com', subject: 's', text: 't' });
    assert.equal(foreign.status, 422);
    assert.equal(foreign.body.error.code, 'domain_not_verified');

    const other = await t.call('POST', '/api/v1/emails', {
      body: {
        from: `app@${t.domain}`,
        to: 'b@example.com',
        subject: 's',
        text: 't',
        scheduled_at: new Date(Date.now() + 3600_000).toISOString(),
      },
    });
    assert.equal((await call('GET', `/api/v1/emails/${other.body.id}`)).status, 404);
    assert.equal((await call('POST', `/api/v1/emails/${other.body.id}/cancel`)).status, 404);
    const list = await call('GET', '/api/v1/emails?limit=100');
    assert.deepEqual(
      list.body.data.map((e: { id: string }) => e.id),
      [mine.body.id],
    );
    // The unrestricted key of the same organization sees both.
    const all = (await t.call('GET', '/api/v1/emails?limit=100')).body.data.map((e: { id: string }) => e.id);
    assert.ok(all.includes(mine.body.id) && all.includes(other.body.id));
  });

  it('limits the Idempotency-Key header to 256 characters', async () => {
    const body = { from: `app@${t.domain}`, to: 'a@example.com', subject: 's', text: 't' };
    const long = await t.call('POST', '/api/v1/emails', { body, headers: { 'Idempotency-Key': 'k'.repeat(257) } });
    assert.equal(long.status, 422);
    assert.equal(long.body.error.code, 'validation_error');
    const max = await t.call('POST', '/api/v1/emails', { body, headers: { 'Idempotency-Key': 'k'.repeat(256) } });
    assert.equal(max.status, 200);
  });

  it('counts an address once across to, cc and bcc, whatever its case', async () => {
    const res = await t.call('POST', '/api/v1/emails', {
      body: {
        from: `app@${t.domain}`,
        to: ['Dup@Example.com'],
        cc: ['dup@example.com'],
        bcc: ['DUP@example.com', 'other@example.com'],
        subject: 's',
        text: 't',
      },
      as: 'test',
    });
    const got = await t.call('GET', `/api/v1/emails/${res.body.id}`);
    const queued = got.body.events.filter((e: { type: string }) => e.type === 'queued').map((e: { recipient: string }) => e.recipient);
    assert.deepEqual(queued.sort(), ['dup@example.com', 'other@example.com']);
  });

  it('sends at once when scheduled_at is a little in the past (clock skew), and refuses it further back', async () => {
    const body = { from: `app@${t.domain}`, to: 'past@example.com', subject: 's', text: 't' };
    const skewed = new Date(Date.now() - 60_000).toISOString();
    const res = await t.call('POST', '/api/v1/emails', { body: { ...body, scheduled_at: skewed } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await waitFor(async () => (await t.call('GET', `/api/v1/emails/${res.body.id}`)).body.last_event === 'sent', 'past-scheduled send');
    for (const at of ['2020-01-01T00:00:00Z', new Date(Date.now() - 6 * 60_000).toISOString()]) {
      const old = await t.call('POST', '/api/v1/emails', { body: { ...body, scheduled_at: at } });
      assert.equal(old.status, 422, at);
      assert.equal(old.body.error.details[0].field, 'scheduled_at');
    }
  });
});
