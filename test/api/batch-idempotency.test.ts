import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { waitFor } from '../support/wait';
import { Email } from '../../db/entities';

describe('API: POST /emails/batch and idempotency', function () {
  let env: TestEnv;
  let t: Tenant;
  const item = (extra: object = {}) => ({ from: `app@${t.domain}`, to: 'user@example.com', subject: 'Batch', text: 'hi', ...extra });

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    t = await newTenant(env);
  });

  it('answers one entry per item, in order, with per-item errors that do not stop the rest', async () => {
    const res = await t.call('POST', '/api/v1/emails/batch', {
      body: [
        item({ subject: 'one' }),
        item({ from: 'app@not-ours.example' }),
        item({ subject: 'three', kind: 'bulk.promo' }),
        item({ headers: { 'Message-ID': '<x@y>' } }),
        { from: `app@${t.domain}` },
        item({ subject: 'six' }),
      ],
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const data = res.body.data;
    assert.equal(data.length, 6);
    assert.match(data[0].id, /^[0-9a-f-]{36}$/);
    assert.equal(data[1].error.code, 'domain_not_verified');
    assert.equal(data[2].error.code, 'stream_mismatch');
    assert.equal(data[3].error.code, 'reserved_header');
    assert.equal(data[4].error.code, 'validation_error');
    assert.equal(typeof data[4].error.message, 'string');
    assert.match(data[5].id, /^[0-9a-f-]{36}$/);
    assert.equal((await t.call('GET', `/api/v1/emails/${data[0].id}`)).body.subject, 'one');
    assert.equal((await t.call('GET', `/api/v1/emails/${data[5].id}`)).body.subject, 'six');
    // Newest first: items of one batch list in reverse send order.
    const list = await t.call('GET', '/api/v1/emails?limit=2');
    assert.deepEqual(
      list.body.data.map((e: { id: string }) => e.id),
      [data[5].id, data[0].id],
    );
  });

  it('refuses a batch with attachments in any item as a whole (422 attachments_not_in_batch) and stores nothing of it', async () => {
    const marker = `att-${Date.now()}`;
    const count = async () =>
      await env.service.db.orm.em.fork().count(Email, { organizationId: t.orgId, subject: { $like: `${marker}%` } });
    const res = await t.call('POST', '/api/v1/emails/batch', {
      body: [
        item({ subject: `${marker}-1` }),
        item({ subject: `${marker}-2`, attachments: [{ filename: 'a.txt', content: 'eA==' }] }),
        item({ subject: `${marker}-3` }),
      ],
    });
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'attachments_not_in_batch');
    assert.equal(res.body.error.details[0].field, '[1].attachments');
    assert.equal(await count(), 0, 'no item of the batch was stored');
  });

  it('takes 1 to 100 items and nothing else', async () => {
    for (const body of [[], Array.from({ length: 101 }, () => item()), item()]) {
      const res = await t.call('POST', '/api/v1/emails/batch', { body });
      assert.equal(res.status, 422);
      assert.equal(res.body.error.code, 'validation_error');
    }
    const full = await t.call('POST', '/api/v1/emails/batch', { body: Array.from({ length: 100 }, (_, i) => item({ subject: `n${i}` })) });
    assert.equal(full.status, 200);
    assert.equal(new Set(full.body.data.map((d: { id: string }) => d.id)).size, 100);
  });

  it('replays an idempotency key: same id, Idempotent-Replayed header, nothing sent again', async () => {
    const first = await t.call('POST', '/api/v1/emails', {
      body: item({ to: 'idem@example.com' }),
      headers: { 'Idempotency-Key': 'order-1' },
    });
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    await waitFor(async () => (await t.call('GET', `/api/v1/emails/${first.body.id}`)).body.last_event === 'sent', 'first send');
    const again = await t.call('POST', '/api/v1/emails', {
      body: item({ to: 'idem@example.com', subject: 'changed' }),
      headers: { 'Idempotency-Key': 'order-1' },
    });
    assert.equal(again.status, 200);
    assert.equal(again.body.id, first.body.id);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    const viaBody = await t.call('POST', '/api/v1/emails', { body: item({ to: 'idem@example.com', idempotency_key: 'order-1' }) });
    assert.equal(viaBody.body.id, first.body.id);
    await new Promise((r) => setTimeout(r, 500));
    const msgId = `<${first.body.id}@${t.domain}>`;
    assert.equal(env.sink.byMessageId(msgId).length, 1);
  });

  it('prefers the header over the body key, and keys are per organization', async () => {
    const a = await t.call('POST', '/api/v1/emails', {
      body: item({ idempotency_key: 'body-key' }),
      headers: { 'Idempotency-Key': 'header-key' },
    });
    const b = await t.call('POST', '/api/v1/emails', { body: item(), headers: { 'Idempotency-Key': 'header-key' } });
    assert.equal(b.body.id, a.body.id);
    const c = await t.call('POST', '/api/v1/emails', { body: item({ idempotency_key: 'body-key' }) });
    assert.notEqual(c.body.id, a.body.id, 'the body key was not used when the header was present');
    const other = await newTenant(env);
    const d = await other.call('POST', '/api/v1/emails', {
      body: { ...item(), from: `app@${other.domain}` },
      headers: { 'Idempotency-Key': 'header-key' },
    });
    assert.notEqual(d.body.id, a.body.id);
    const long = await t.call('POST', '/api/v1/emails', { body: item({ idempotency_key: 'k'.repeat(257) }) });
    assert.equal(long.status, 422);
  });

  it('10 concurrent identical requests make exactly one message', async () => {
    const key = `concurrent-${Date.now()}`;
    const results = await Promise.all(
      Array.from({ length: 10 }, () =>
        t.call('POST', '/api/v1/emails', { body: item({ to: 'race@example.com' }), headers: { 'Idempotency-Key': key } }),
      ),
    );
    assert.ok(
      results.every((r) => r.status === 200),
      JSON.stringify(results.map((r) => r.body)),
    );
    const ids = new Set(results.map((r) => r.body.id));
    assert.equal(ids.size, 1);
    assert.equal(results.filter((r) => r.headers.get('idempotent-replayed') === 'true').length, 9);
    const rows = await env.service.db.orm.em.fork().count(Email, { organizationId: t.orgId, idempotencyKey: key });
    assert.equal(rows, 1);
    const [id] = [...ids];
    await waitFor(async () => (await t.call('GET', `/api/v1/emails/${id}`)).body.last_event === 'sent', 'the one message sent');
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(env.sink.byMessageId(`<${id}@${t.domain}>`).length, 1);
  });

  it('batch items use their own idempotency_key and ignore the header', async () => {
    const first = await t.call('POST', '/api/v1/emails/batch', {
      body: [item({ idempotency_key: 'b-1' }), item({ idempotency_key: 'b-2' }), item({ idempotency_key: 'b-1' })],
      headers: { 'Idempotency-Key': 'ignored' },
    });
    const [a, b, c] = first.body.data;
    assert.notEqual(a.id, b.id);
    assert.equal(c.id, a.id, 'a repeated key inside one batch is a replay');
    const second = await t.call('POST', '/api/v1/emails/batch', { body: [item({ idempotency_key: 'b-2' }), item()] });
    assert.equal(second.body.data[0].id, b.id);
    const single = await t.call('POST', '/api/v1/emails', { body: item(), headers: { 'Idempotency-Key': 'ignored' } });
    assert.equal(single.headers.get('idempotent-replayed'), null, 'the batch header was not stored as a key');
  });

  it('a replay queues a message that was stored but never queued', async () => {
    const em = env.service.db.orm.em.fork();
    const first = await t.call('POST', '/api/v1/emails', {
      body: item({ scheduled_at: new Date(Date.now() + 3600_000).toISOString() }),
      headers: { 'Idempotency-Key': 'stored-not-queued' },
    });
    // Simulate a crash between commit and workflow start: a fresh message row without a workflow.
    const original = await em.findOneOrFail(Email, { id: first.body.id });
    const orphanId = '0192f000-0000-7000-8000-' + Date.now().toString(16).padStart(12, '0').slice(-12);
    await env.service.db.orm.em
      .fork()
      .getConnection()
      .execute(
        `insert into emails (id, organization_id, api_key_id, domain_id, from_address, to_addresses, subject, text, mode, status, message_id, idempotency_key, created_at, updated_at)
       values (?, ?, ?, ?, ?, '["orphan@example.com"]', 'orphan', 'hi', 'live', 'queued', ?, 'orphan-key', now(), now())`,
        [orphanId, t.orgId, original.apiKeyId, original.domainId, `app@${t.domain}`, `<${orphanId}@${t.domain}>`],
      );
    await env.service.db.orm.em
      .fork()
      .getConnection()
      .execute(`insert into recipients (id, email_id, address, field) values (gen_random_uuid(), ?, 'orphan@example.com', 'to')`, [
        orphanId,
      ]);
    const replay = await t.call('POST', '/api/v1/emails', { body: item(), headers: { 'Idempotency-Key': 'orphan-key' } });
    assert.equal(replay.body.id, orphanId);
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    await waitFor(
      async () => (await t.call('GET', `/api/v1/emails/${orphanId}`)).body.last_event === 'sent',
      'orphan delivered after replay',
    );
    assert.equal(env.sink.byMessageId(`<${orphanId}@${t.domain}>`).length, 1);
  });
});
