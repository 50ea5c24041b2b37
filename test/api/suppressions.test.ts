import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { waitFor } from '../support/wait';

describe('API: suppression list', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
  });

  const add = (email: string, tenant = t) => tenant.call('POST', '/api/v1/suppressions', { as: 'admin', body: { email } });
  const list = async (query = '', tenant = t) => (await tenant.call('GET', `/api/v1/suppressions${query}`, { as: 'admin' })).body;
  const send = (to: string) => t.call('POST', '/api/v1/emails', { body: { from: `app@${t.domain}`, to, subject: 'Hello', text: 'hi' } });

  it('adds an address once (201, then 200 unchanged), lists it, filters by reason and email, and audit-logs the add', async () => {
    const address = `Manual-${Date.now()}@Example.com`;
    const first = await add(address);
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.equal(first.body.object, 'suppression');
    assert.equal(first.body.email, address.toLowerCase());
    assert.equal(first.body.reason, 'manual');
    assert.equal(first.body.email_id, null);
    const again = await add(address.toLowerCase());
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, first.body, 'the same row, unchanged');

    const byEmail = await list(`?email=${encodeURIComponent(address.toUpperCase())}`);
    assert.deepEqual(
      byEmail.data.map((s: any) => s.id),
      [first.body.id],
    );
    assert.ok((await list('?reason=manual')).data.some((s: any) => s.id === first.body.id));
    assert.ok(!(await list('?reason=bounce')).data.some((s: any) => s.id === first.body.id));

    const log = (await t.call('GET', '/api/v1/audit-log', { as: 'admin' })).body.data;
    assert.equal(
      log.filter((e: any) => e.action === 'suppression.created' && e.target.id === first.body.id).length,
      1,
      'one entry, not two',
    );
  });

  it('keeps the note of a removal in its audit row, and refuses a note of two lines with 422, removing nothing', async () => {
    const address = `noted-${Date.now()}@example.com`;
    await add(address);
    const bad = await t.call('DELETE', `/api/v1/suppressions/${encodeURIComponent(address)}?note=${encodeURIComponent('a\nb')}`, {
      as: 'admin',
    });
    assert.equal(bad.status, 422);
    assert.equal((await list(`?email=${encodeURIComponent(address)}`)).data.length, 1, 'still listed');
    const ok = await t.call(
      'DELETE',
      `/api/v1/suppressions/${encodeURIComponent(address)}?note=${encodeURIComponent('asked by support')}`,
      { as: 'admin' },
    );
    assert.equal(ok.status, 200);
    const log = (await t.call('GET', '/api/v1/audit-log?action=suppression.deleted', { as: 'admin' })).body.data;
    const entry = log.find((e: { details: { email: string } }) => e.details.email === address);
    assert.equal(entry.details.note, 'asked by support');
    assert.equal(entry.actor, `key:${entry.key_id}`);
  });

  it('pages newest first with a cursor', async () => {
    const tenant = await newTenant(env);
    for (let i = 0; i < 5; i++) assert.equal((await add(`page-${i}@example.com`, tenant)).status, 201);
    const first = await list('?limit=2', tenant);
    assert.deepEqual(
      first.data.map((s: any) => s.email),
      ['page-4@example.com', 'page-3@example.com'],
    );
    const second = await list(`?limit=2&cursor=${first.next_cursor}`, tenant);
    const third = await list(`?limit=2&cursor=${second.next_cursor}`, tenant);
    assert.deepEqual(
      [...second.data, ...third.data].map((s: any) => s.email),
      ['page-2@example.com', 'page-1@example.com', 'page-0@example.com'],
    );
    assert.equal(third.next_cursor, undefined);
  });

  it('drops a listed address from sends; after DELETE it is sent again', async () => {
    const address = `drop-${Date.now()}@example.com`;
    assert.equal((await add(address)).status, 201);
    const dropped = await send(address);
    assert.equal(dropped.status, 200);
    assert.deepEqual(dropped.body.suppressed, [address]);

    const del = await t.call('DELETE', `/api/v1/suppressions/${encodeURIComponent(address)}`, { as: 'admin' });
    assert.equal(del.status, 200);
    assert.equal(del.body.deleted, true);
    assert.equal(del.body.email, address);
    assert.equal((await t.call('DELETE', `/api/v1/suppressions/${encodeURIComponent(address)}`, { as: 'admin' })).status, 404);
    const log = (await t.call('GET', '/api/v1/audit-log', { as: 'admin' })).body.data;
    assert.ok(log.some((e: any) => e.action === 'suppression.deleted' && e.details.email === address));

    const sent = await send(address);
    assert.equal(sent.body.suppressed, undefined);
    await waitFor(async () => env.sink.received.find((m) => m.envelopeTo.includes(address)), 'the message sent again');
  });

  it('keeps organizations apart', async () => {
    const other = await newTenant(env);
    const address = `mine-${Date.now()}@example.com`;
    assert.equal((await add(address)).status, 201);
    assert.equal((await list(`?email=${encodeURIComponent(address)}`, other)).data.length, 0);
    assert.equal((await other.call('DELETE', `/api/v1/suppressions/${encodeURIComponent(address)}`, { as: 'admin' })).status, 404);
    assert.equal((await list(`?email=${encodeURIComponent(address)}`)).data.length, 1, 'still listed for its owner');
    // The other organization may list the same address for itself.
    assert.equal((await add(address, other)).status, 201);
  });

  it('needs a live ADMIN key, and refuses what is not one address with 422, writing nothing', async () => {
    const address = `perm-${Date.now()}@example.com`;
    const bySend = await t.call('POST', '/api/v1/suppressions', { as: 'send', body: { email: address } });
    assert.equal(bySend.status, 403);
    assert.equal(bySend.body.error.code, 'forbidden');
    const byTest = await t.call('POST', '/api/v1/suppressions', { as: 'test', body: { email: address } });
    assert.equal(byTest.status, 403);
    assert.equal(byTest.body.error.code, 'test_key_not_allowed');
    for (const email of ['Ann <ann@example.com>', 'a@example.com, b@example.com', 'not-an-address', 'a@[127.0.0.1]', '']) {
      const res = await add(email);
      assert.equal(res.status, 422, email);
      assert.equal(res.body.error.code, 'validation_error');
    }
    const unknown = await t.call('POST', '/api/v1/suppressions', { as: 'admin', body: { email: address, reason: 'bounce' } });
    assert.equal(unknown.status, 422, 'unknown fields are refused');
    assert.equal((await t.call('GET', '/api/v1/suppressions?reason=unsubscribe', { as: 'admin' })).status, 422);
    assert.equal((await list(`?email=${encodeURIComponent(address)}`)).data.length, 0);
  });
});
