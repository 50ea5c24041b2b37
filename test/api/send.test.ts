import assert from 'node:assert/strict';
import http from 'node:http';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { request } from '../support/http';
import { waitFor } from '../support/wait';
import { createKey } from '../../core/provisioning';

describe('API: POST /emails', function () {
  let env: TestEnv;
  let t: Tenant;
  const base = () => ({ from: `App <app@${t.domain}>`, to: 'user@example.com', subject: 'Hello', html: '<p>hi</p>' });
  const countEmails = async () => (await t.call('GET', '/api/v1/emails?limit=100')).body.data.length as number;

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    t = await newTenant(env);
  });

  /** Sends the headers of a body of `length` bytes and only its first bytes; resolves with the status if one comes anyway. */
  function statusBeforeBodyEnds(token: string, length: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        `${env.url}/api/v1/emails`,
        { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': length } },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
          req.destroy();
        },
      );
      req.on('error', () => undefined);
      req.write('{"html": "');
      setTimeout(() => {
        req.destroy();
        reject(new Error('no answer while the body was incomplete: the server waited for the body'));
      }, 3000).unref();
    });
  }

  async function rejects(body: unknown, status: number, code: string, opts: { headers?: Record<string, string> } = {}) {
    const before = await countEmails();
    const res = await t.call('POST', '/api/v1/emails', { body, ...opts });
    assert.equal(res.status, status, JSON.stringify(res.body));
    assert.equal(res.body.error.code, code, JSON.stringify(res.body));
    assert.equal(typeof res.body.error.message, 'string');
    assert.equal(await countEmails(), before, 'a rejected request must write nothing');
    return res.body.error;
  }

  it('accepts a valid email and returns its id', async () => {
    const res = await t.call('POST', '/api/v1/emails', { body: base() });
    assert.equal(res.status, 200);
    assert.match(res.body.id, /^[0-9a-f-]{36}$/);
    assert.equal(res.body.suppressed, undefined);
    const got = await t.call('GET', `/api/v1/emails/${res.body.id}`);
    assert.equal(got.status, 200);
    assert.equal(got.body.object, 'email');
    assert.equal(got.body.from, `App <app@${t.domain}>`);
    assert.deepEqual(got.body.to, ['user@example.com']);
    assert.equal(got.body.mode, 'live');
    assert.match(got.body.created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    assert.equal(got.body.events[0].type, 'queued');
    // Fields left at their default are not sent to the store statement; it stores the defaults.
    assert.deepEqual(got.body.cc, []);
    assert.deepEqual(got.body.bcc, []);
    assert.equal(got.body.reply_to, null);
    assert.deepEqual(got.body.headers, {});
    assert.deepEqual(got.body.tags, []);
    assert.equal(got.body.template, null);
    assert.equal(got.body.scheduled_at, null);
  });

  it('stores every optional field as given', async () => {
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const res = await t.call('POST', '/api/v1/emails', {
      body: {
        ...base(),
        cc: 'cc@example.com',
        bcc: ['bcc@example.com'],
        reply_to: 'Replies <reply@example.com>',
        headers: { 'X-Entity-Ref': 'abc' },
        tags: [{ name: 'plan', value: 'pro' }],
        scheduled_at: at,
      },
    });
    assert.equal(res.status, 200);
    const got = await t.call('GET', `/api/v1/emails/${res.body.id}`);
    assert.deepEqual(got.body.cc, ['cc@example.com']);
    assert.deepEqual(got.body.bcc, ['bcc@example.com']);
    assert.equal(got.body.reply_to, 'Replies <reply@example.com>');
    assert.deepEqual(got.body.headers, { 'X-Entity-Ref': 'abc' });
    assert.deepEqual(got.body.tags, [{ name: 'plan', value: 'pro' }]);
    assert.equal(got.body.scheduled_at, at);
  });

  it('requires a Bearer key, refuses unknown ones', async () => {
    const none = await request(env.url, 'POST', '/api/v1/emails', { body: base() });
    assert.equal(none.status, 401);
    assert.equal(none.body.error.code, 'missing_api_key');
    const wrong = await request(env.url, 'POST', '/api/v1/emails', { body: base(), token: 'svc_live_' + 'x'.repeat(32) });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.error.code, 'invalid_api_key');
  });

  it('answers an unknown or revoked key with 401 before looking at the body, and stores nothing', async () => {
    const before = await countEmails();
    const wrong = 'svc_live_' + 'y'.repeat(32);
    const revoked = (await t.call('POST', '/api/v1/keys', { as: 'admin', body: { name: 'to-revoke', permission: 'send', mode: 'live' } }))
      .body;
    assert.ok(revoked.token, JSON.stringify(revoked));
    assert.equal((await t.call('DELETE', `/api/v1/keys/${revoked.id}`, { as: 'admin' })).status, 200);
    for (const token of [wrong, revoked.token]) {
      for (const [path, body] of [
        ['/api/v1/emails', base()],
        ['/api/v1/emails', { to: 'nobody' }],
        ['/api/v1/emails/batch', [base()]],
        ['/api/v1/emails/batch', { not: 'an array' }],
      ] as const) {
        const res = await request(env.url, 'POST', path, { token, body });
        assert.equal(res.status, 401, `${path} ${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.error.code, 'invalid_api_key');
      }
      // Malformed JSON and a wrong content type: still the key first.
      assert.equal((await request(env.url, 'POST', '/api/v1/emails', { token, raw: '{"from": ' })).status, 401);
      assert.equal(
        (await request(env.url, 'POST', '/api/v1/emails', { token, raw: 'a=b', contentType: 'application/x-www-form-urlencoded' })).status,
        401,
      );
      // A large body is not read for an unknown key: the answer comes while the body is still unsent.
      assert.equal(await statusBeforeBodyEnds(token, 600 * 1024), 401);
    }
    assert.equal(await countEmails(), before);
  });

  it('sends a large message (its key is checked before the body is read) and charges it once', async () => {
    // At 1 request per second, a second charge for the same request would answer 429.
    const { token } = await createKey(env.service.db.orm, t.orgId, {
      name: 'one-per-second',
      permission: 'send',
      mode: 'live',
      rateLimit: 1,
    });
    const res = await request(env.url, 'POST', '/api/v1/emails', { token, body: { ...base(), html: `<p>${'x'.repeat(600 * 1024)}</p>` } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const got = (await t.call('GET', `/api/v1/emails/${res.body.id}`)).body;
    assert.equal(got.html.length, 600 * 1024 + 7);
  });

  it('gives malformed JSON, wrong content type, oversized bodies and unknown routes their own codes', async () => {
    const bad = await t.call('POST', '/api/v1/emails', { raw: '{"from": ' });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'invalid_json');
    const form = await t.call('POST', '/api/v1/emails', { raw: 'from=a', contentType: 'application/x-www-form-urlencoded' });
    assert.equal(form.status, 415);
    assert.equal(form.body.error.code, 'unsupported_media_type');
    const huge = await t.call('POST', '/api/v1/emails', { raw: JSON.stringify({ ...base(), html: 'x'.repeat(41 * 1024 * 1024) }) });
    assert.equal(huge.status, 413);
    assert.equal(huge.body.error.code, 'payload_too_large');
    const route = await t.call('GET', '/api/v1/no-such-thing');
    assert.equal(route.status, 404);
    assert.equal(route.body.error.code, 'route_not_found');
    const method = await t.call('DELETE', '/api/v1/emails');
    assert.equal(method.status, 405);
    assert.equal(method.body.error.code, 'method_not_allowed');
    assert.match(method.headers.get('allow') ?? '', /GET/);
    assert.match(method.headers.get('allow') ?? '', /POST/);
    const empty = await t.call('POST', '/api/v1/emails', { raw: '', contentType: 'application/json' });
    assert.equal(empty.status, 400);
    assert.equal(empty.body.error.code, 'invalid_json');
    const arr = await t.call('POST', '/api/v1/emails', { body: [base()] });
    assert.equal(arr.status, 422);
    assert.equal(arr.body.error.code, 'validation_error');
  });

  it('validates required fields and types with details', async () => {
    const e = await rejects({ to: 'a@example.com' }, 422, 'validation_error');
    const fields = e.details.map((d: { field: string }) => d.field);
    assert.ok(fields.includes('from') && fields.includes('subject'), JSON.stringify(e.details));
    await rejects({ ...base(), html: undefined }, 422, 'validation_error');
    await rejects({ ...base(), from: 'not an address' }, 422, 'validation_error');
    await rejects({ ...base(), to: ['ok@example.com', 'broken@'] }, 422, 'validation_error');
    await rejects({ ...base(), to: 42 }, 422, 'validation_error');
    await rejects({ ...base(), reply_to: 'x' }, 422, 'validation_error');
    await rejects({ ...base(), unknown_field: 1 }, 422, 'validation_error');
    await rejects({ ...base(), subject: 5 }, 422, 'validation_error');
  });

  it('limits recipients to 50 across to, cc and bcc', async () => {
    const addrs = (n: number, p: string) => Array.from({ length: n }, (_, i) => `${p}${i}@example.com`);
    const ok = await t.call('POST', '/api/v1/emails', { body: { ...base(), to: addrs(30, 'a'), cc: addrs(10, 'b'), bcc: addrs(10, 'c') } });
    assert.equal(ok.status, 200);
    await rejects({ ...base(), to: addrs(30, 'a'), cc: addrs(10, 'b'), bcc: addrs(11, 'c') }, 422, 'validation_error');
  });

  it('enforces subject length 1..998 without line breaks', async () => {
    assert.equal((await t.call('POST', '/api/v1/emails', { body: { ...base(), subject: 's'.repeat(998) } })).status, 200);
    await rejects({ ...base(), subject: 's'.repeat(999) }, 422, 'validation_error');
    await rejects({ ...base(), subject: '' }, 422, 'validation_error');
    await rejects({ ...base(), subject: 'Hello\r\nBcc: victim@example.com' }, 422, 'validation_error');
  });

  it('limits html and text to 2 MB each', async () => {
    assert.equal((await t.call('POST', '/api/v1/emails', { body: { ...base(), html: 'h'.repeat(2_000_000) } })).status, 200);
    await rejects({ ...base(), html: 'h'.repeat(2_000_001) }, 422, 'validation_error');
    await rejects({ ...base(), text: 't'.repeat(2_000_001) }, 422, 'validation_error');
  });

  it('refuses reserved headers, checks header names and values, drops List-Unsubscribe', async () => {
    for (const h of ['Message-ID', 'from', 'DKIM-Signature', 'content-type', 'Return-Path', 'BCC']) {
      await rejects({ ...base(), headers: { [h]: 'x' } }, 422, 'reserved_header');
    }
    await rejects({ ...base(), headers: { 'X Bad': 'x' } }, 422, 'validation_error');
    await rejects({ ...base(), headers: { 'X-Ok': 'a\r\nBcc: evil@example.com' } }, 422, 'validation_error');
    await rejects({ ...base(), headers: { 'X-Long': 'v'.repeat(1001) } }, 422, 'validation_error');
    const ok = await t.call('POST', '/api/v1/emails', {
      body: {
        ...base(),
        headers: {
          'X-Entity-Ref': 'abc',
          'List-Unsubscribe': '<https://evil.example/u>',
          'list-unsubscribe-post': 'List-Unsubscribe=One-Click',
        },
      },
    });
    assert.equal(ok.status, 200);
    const got = await t.call('GET', `/api/v1/emails/${ok.body.id}`);
    assert.deepEqual(got.body.headers, { 'X-Entity-Ref': 'abc' });
  });

  it('validates tags and reads kind from a kind tag', async () => {
    await rejects({ ...base(), tags: Array.from({ length: 21 }, (_, i) => ({ name: `n${i}`, value: 'v' })) }, 422, 'validation_error');
    await rejects({ ...base(), tags: [{ name: 'n'.repeat(65), value: 'v' }] }, 422, 'validation_error');
    await rejects({ ...base(), tags: [{ name: 'n', value: 'v'.repeat(257) }] }, 422, 'validation_error');
    await rejects({ ...base(), kind: 'k'.repeat(65) }, 422, 'validation_error');
    await rejects({ ...base(), tags: [{ name: 'kind', value: 'k'.repeat(65) }] }, 422, 'validation_error');
    const res = await t.call('POST', '/api/v1/emails', {
      body: {
        ...base(),
        tags: [
          { name: 'kind', value: 'receipt.order' },
          { name: 'plan', value: 'pro' },
        ],
      },
    });
    assert.equal(res.status, 200);
    const got = await t.call('GET', `/api/v1/emails/${res.body.id}`);
    assert.equal(got.body.kind, 'receipt.order');
    const explicit = await t.call('POST', '/api/v1/emails', {
      body: { ...base(), kind: 'welcome', tags: [{ name: 'kind', value: 'receipt.order' }] },
    });
    assert.equal((await t.call('GET', `/api/v1/emails/${explicit.body.id}`)).body.kind, 'welcome');
  });

  it('bulk kinds need exactly one recipient and a bulk-stream domain', async () => {
    await rejects({ ...base(), kind: 'digest.weekly', to: ['a@example.com', 'b@example.com'] }, 422, 'validation_error');
    await rejects({ ...base(), kind: 'broadcast.news' }, 422, 'stream_mismatch');
    await rejects({ ...base(), tags: [{ name: 'kind', value: 'bulk.promo' }] }, 422, 'stream_mismatch');
    const bulk = await newTenant(env, { stream: 'bulk' });
    const ok = await bulk.call('POST', '/api/v1/emails', { body: { ...base(), from: `news@${bulk.domain}`, kind: 'sequence.onboarding' } });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
  });

  it('refuses a sender domain that is not a verified domain of the organization', async () => {
    await rejects({ ...base(), from: 'app@unknown-domain.example' }, 422, 'domain_not_verified');
    const other = await newTenant(env);
    await rejects({ ...base(), from: `app@${other.domain}` }, 422, 'domain_not_verified');
  });

  it('refuses track on a domain without a verified tracking host (test/api/bulk-mail.test.ts tracks with one)', async () => {
    const e = await rejects({ ...base(), track: { opens: true } }, 422, 'validation_error');
    assert.match(e.message, /tracking host/);
  });

  it('validates scheduled_at: ISO 8601 with offset, at most 30 days ahead', async () => {
    await rejects({ ...base(), scheduled_at: '2030-01-01 10:00' }, 422, 'validation_error');
    await rejects({ ...base(), scheduled_at: '2030-01-01T10:00:00' }, 422, 'validation_error');
    await rejects({ ...base(), scheduled_at: new Date(Date.now() + 31 * 86400_000).toISOString() }, 422, 'validation_error');
    const at = new Date(Date.now() + 3600_000).toISOString().replace('Z', '+00:00');
    const ok = await t.call('POST', '/api/v1/emails', { body: { ...base(), scheduled_at: at } });
    assert.equal(ok.status, 200);
    const got = await t.call('GET', `/api/v1/emails/${ok.body.id}`);
    assert.equal(got.body.scheduled_at, new Date(at).toISOString());
    assert.equal(got.body.last_event, 'queued');
  });

  it('stores attachments, lists their metadata and never returns content', async () => {
    const content = Buffer.from('%PDF-1.4 hello').toString('base64');
    const res = await t.call('POST', '/api/v1/emails', {
      body: {
        ...base(),
        attachments: [
          { filename: 'a.pdf', content, content_type: 'application/pdf' },
          { filename: 'b.bin', content },
        ],
      },
    });
    assert.equal(res.status, 200);
    const got = await t.call('GET', `/api/v1/emails/${res.body.id}`);
    assert.deepEqual(got.body.attachments, [
      { filename: 'a.pdf', content_type: 'application/pdf', size: 14 },
      { filename: 'b.bin', content_type: 'application/octet-stream', size: 14 },
    ]);
    assert.ok(!JSON.stringify(got.body).includes(content));
  });

  it('limits attachments to 10 files and 10 MiB decoded', async () => {
    const small = Buffer.from('x').toString('base64');
    await rejects(
      { ...base(), attachments: Array.from({ length: 11 }, (_, i) => ({ filename: `f${i}`, content: small })) },
      422,
      'validation_error',
    );
    const big = Buffer.alloc(5 * 1024 * 1024 + 1).toString('base64');
    await rejects(
      {
        ...base(),
        attachments: [
          { filename: 'a', content: big },
          { filename: 'b', content: big },
        ],
      },
      422,
      'validation_error',
    );
    await rejects({ ...base(), attachments: [{ filename: 'a', content: 'not base64!!' }] }, 422, 'validation_error');
    await rejects({ ...base(), attachments: [{ filename: 'a\r\nX: y', content: small }] }, 422, 'validation_error');
  });

  it('refuses NUL characters (PostgreSQL text cannot hold them) with validation_error, naming the field', async () => {
    const err = await rejects({ ...base(), text: 'a\u0000b' }, 422, 'validation_error');
    assert.equal(err.details[0].field, 'text');
    await rejects({ ...base(), tags: [{ name: 'k', value: 'x\u0000' }] }, 422, 'validation_error');
    await rejects({ ...base(), headers: { 'X-Note': '\u0000' } }, 422, 'validation_error');
  });

  it('stores content exactly, whatever it holds: quotes, placeholders, JSON, astral and lone-surrogate characters', async () => {
    const tricky = `it's "quoted" \\ back\\slash ? $1 :name ?? {"json": [1]} ' -- ; drop table emails; 🎉`;
    const res = await t.call('POST', '/api/v1/emails', {
      body: {
        ...base(),
        subject: tricky,
        text: tricky,
        html: `<p>${tricky}</p>`,
        tags: [{ name: 'note', value: tricky.slice(0, 200) }],
        headers: { 'X-Note': tricky },
      },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const got = (await t.call('GET', `/api/v1/emails/${res.body.id}`)).body;
    assert.equal(got.subject, tricky);
    assert.equal(got.text, tricky);
    assert.equal(got.html, `<p>${tricky}</p>`);
    assert.deepEqual(got.tags, [{ name: 'note', value: tricky.slice(0, 200) }]);
    assert.equal(got.headers['X-Note'], tricky);
    // A lone surrogate cannot be encoded in UTF-8; it is stored as U+FFFD, as any UTF-8 encoder does.
    const lone = await t.call('POST', '/api/v1/emails', {
      raw: JSON.stringify({ ...base(), text: 'x' }).replace('"x"', '"a\\ud800b"'),
    });
    assert.equal(lone.status, 200, JSON.stringify(lone.body));
    assert.equal((await t.call('GET', `/api/v1/emails/${lone.body.id}`)).body.text, 'a\ufffdb');
  });

  it('drops suppressed recipients; all suppressed is stored as suppressed and never sent', async () => {
    // A live hard bounce puts the address on the suppression list (end to end through the worker).
    env.sink.rules.set('gone@example.com', { rcpt: 'reject', code: 550, message: '5.1.1 user unknown' });
    const first = await t.call('POST', '/api/v1/emails', { body: { ...base(), to: 'gone@example.com' } });
    await waitFor(async () => (await t.call('GET', `/api/v1/emails/${first.body.id}`)).body.last_event === 'bounced', 'hard bounce');

    const mixed = await t.call('POST', '/api/v1/emails', { body: { ...base(), to: ['Gone@Example.com', 'stays@example.com'] } });
    assert.equal(mixed.status, 200);
    assert.deepEqual(mixed.body.suppressed, ['Gone@Example.com']);
    const all = await t.call('POST', '/api/v1/emails', { body: { ...base(), to: 'gone@example.com' } });
    assert.equal(all.status, 200);
    assert.deepEqual(all.body.suppressed, ['gone@example.com']);
    const got = await t.call('GET', `/api/v1/emails/${all.body.id}`);
    assert.equal(got.body.last_event, 'suppressed');
    assert.deepEqual(
      got.body.events.map((e: { type: string }) => e.type),
      ['suppressed'],
    );
    const cancel = await t.call('POST', `/api/v1/emails/${all.body.id}/cancel`);
    assert.equal(cancel.status, 409);
    // Suppression is per organization.
    const other = await newTenant(env);
    const fine = await other.call('POST', '/api/v1/emails', { body: { ...base(), from: `app@${other.domain}`, to: 'gone@example.com' } });
    assert.equal(fine.body.suppressed, undefined);
  });

  it("keeps organizations apart: another organization's email is 404", async () => {
    const res = await t.call('POST', '/api/v1/emails', { body: base() });
    const other = await newTenant(env);
    assert.equal((await other.call('GET', `/api/v1/emails/${res.body.id}`)).status, 404);
    assert.equal((await other.call('POST', `/api/v1/emails/${res.body.id}/cancel`)).status, 404);
    assert.equal((await other.call('GET', '/api/v1/emails/not-a-uuid')).status, 404);
  });

  it('refuses test keys at ADMIN endpoints and SEND keys too', async () => {
    const test = await t.call('GET', '/api/v1/organization', { as: 'test' });
    assert.equal(test.status, 403);
    assert.equal(test.body.error.code, 'test_key_not_allowed');
    const send = await t.call('GET', '/api/v1/organization', { as: 'send' });
    assert.equal(send.status, 403);
    assert.equal(send.body.error.code, 'forbidden');
    const admin = await t.call('GET', '/api/v1/organization', { as: 'admin' });
    assert.equal(admin.status, 200);
    assert.equal(admin.body.id, t.orgId);
  });

  it('answers /health and /ready with 200 once database and engine are up (the embedded engine is its own worker)', async () => {
    for (const path of ['/health', '/ready']) {
      const res = await request(env.url, 'GET', path);
      assert.equal(res.status, 200, path);
      assert.deepEqual(res.body, { status: 'ok', database: 'up', engine: 'embedded:up', workers: 'polling' }, path);
    }
  });
});
