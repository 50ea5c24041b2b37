import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { request } from '../support/http';
import { createDomain, createKey } from '../../core/provisioning';
import { hashToken } from '../../core/tokens';

describe('API: keys (create, list, rotate, revoke) and their rules', function () {
  let env: TestEnv;
  let t: Tenant;
  let other: Tenant;
  const count = async (sql: string, args: unknown[]) =>
    Number((await env.service.db.orm.em.fork().getConnection().execute(sql, args))[0].n);
  const keysOf = (orgId: string) => count('select count(*) as n from api_keys where organization_id = ?', [orgId]);
  const auditOf = (orgId: string) => count('select count(*) as n from audit_log where organization_id = ?', [orgId]);
  /** Ends a superseded token's grace now (moved in the database rather than waited for). */
  const expire = (token: string) =>
    env.service.db.orm.em
      .fork()
      .getConnection()
      .execute(`update api_key_tokens set expires_at = now() - interval '1 second' where token_hash = ?`, [hashToken(token)]);
  const sendWith = (token: string) =>
    request(env.url, 'POST', '/api/v1/emails', { token, body: { from: `app@${t.domain}`, to: 'k@example.com', subject: 's', text: 't' } });

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    t = await newTenant(env);
    other = await newTenant(env);
  });

  it('creates a key whose token is shown once, works at once and is stored only as a hash', async () => {
    const res = await t.call('POST', '/api/v1/keys', {
      as: 'admin',
      body: { name: 'backend', permission: 'send', mode: 'live', rate_limit: 50 },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const { token, id } = res.body;
    assert.match(token, /^svc_live_[A-Za-z0-9_-]{20,}$/);
    assert.equal(res.body.object, 'key');
    assert.equal(res.body.rate_limit, 50);
    assert.equal(res.body.token_prefix, token.slice(0, 13));
    assert.equal((await sendWith(token)).status, 200);
    const listed = await t.call('GET', '/api/v1/keys', { as: 'admin' });
    const mine = listed.body.data.find((k: { id: string }) => k.id === id);
    assert.ok(mine);
    assert.equal(JSON.stringify(listed.body).includes(token), false, 'list never shows a token');
    const one = await t.call('GET', `/api/v1/keys/${id}`, { as: 'admin' });
    assert.equal(one.body.token, undefined);
    const stored: { j: string }[] = await env.service.db.orm.em
      .fork()
      .getConnection()
      .execute(
        `select row_to_json(k)::text as j from api_keys k where id = ? union all select row_to_json(t)::text from api_key_tokens t where api_key_id = ?`,
        [id, id],
      );
    assert.equal(stored.length, 2);
    assert.ok(
      stored.every((r: { j: string }) => !r.j.includes(token)),
      'the database holds no clear token',
    );
    assert.ok(stored[1].j.includes(hashToken(token)), 'only its SHA-256');
    const test = await t.call('POST', '/api/v1/keys', { as: 'admin', body: { name: 'ci', permission: 'full', mode: 'test' } });
    assert.match(test.body.token, /^svc_test_/);
  });

  it('shows when a key was last used: null before its first request, then the second of its last one', async () => {
    const created = await t.call('POST', '/api/v1/keys', { as: 'admin', body: { name: 'used later', permission: 'send', mode: 'test' } });
    assert.equal(created.body.last_used_at, null);
    const before = Date.now();
    await request(env.url, 'GET', '/api/v1/emails', { token: created.body.token });
    const read = await t.call('GET', `/api/v1/keys/${created.body.id}`, { as: 'admin' });
    const used = Date.parse(read.body.last_used_at);
    assert.ok(used >= Math.floor(before / 1000) * 1000 - 1000 && used <= Date.now(), read.body.last_used_at);
  });

  it('never mints or rotates an ADMIN key, and writes nothing when refusing', async () => {
    const [keys, audits] = [await keysOf(t.orgId), await auditOf(t.orgId)];
    const mint = await t.call('POST', '/api/v1/keys', { as: 'admin', body: { name: 'root', permission: 'admin', mode: 'live' } });
    assert.equal(mint.status, 403);
    assert.equal(mint.body.error.code, 'admin_key_not_mintable');
    const admins = await t.call('GET', '/api/v1/keys', { as: 'admin' });
    const adminKey = admins.body.data.find((k: { permission: string }) => k.permission === 'admin');
    const rotate = await t.call('POST', `/api/v1/keys/${adminKey.id}/rotate`, { as: 'admin' });
    assert.equal(rotate.status, 403);
    assert.equal(rotate.body.error.code, 'admin_key_not_mintable');
    assert.equal(await keysOf(t.orgId), keys);
    assert.equal(await auditOf(t.orgId), audits);
  });

  it('answers bad bodies with 422 validation_error (400 for broken JSON) and writes nothing', async () => {
    const [keys, audits] = [await keysOf(t.orgId), await auditOf(t.orgId)];
    const foreignDomain = other.domainId;
    const bad: unknown[] = [
      {},
      { permission: 'send', mode: 'live' },
      { name: '', permission: 'send', mode: 'live' },
      { name: 'x'.repeat(129), permission: 'send', mode: 'live' },
      { name: 'k', permission: 'owner', mode: 'live' },
      { name: 'k', permission: 'send', mode: 'sandbox' },
      { name: 'k', permission: 'send', mode: 'live', rate_limit: 0 },
      { name: 'k', permission: 'send', mode: 'live', rate_limit: 1001 },
      { name: 'k', permission: 'send', mode: 'live', rate_limit: 2.5 },
      { name: 'k', permission: 'send', mode: 'live', rate_limit: '10' },
      { name: 'k', permission: 'send', mode: 'live', domain_ids: [] },
      { name: 'k', permission: 'send', mode: 'live', domain_ids: ['not-a-uuid'] },
      { name: 'k', permission: 'send', mode: 'live', domain_ids: [foreignDomain] },
      { name: 'k', permission: 'send', mode: 'live', scopes: ['all'] },
      ['name', 'k'],
    ];
    for (const body of bad) {
      const res = await t.call('POST', '/api/v1/keys', { as: 'admin', body });
      assert.equal(res.status, 422, `${JSON.stringify(body)} → ${res.status} ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'validation_error');
    }
    const broken = await t.call('POST', '/api/v1/keys', { as: 'admin', raw: '{"name": ' });
    assert.equal(broken.status, 400);
    assert.equal(await keysOf(t.orgId), keys);
    assert.equal(await auditOf(t.orgId), audits);
  });

  it('a domain-restricted key grants only domains it holds, never an unrestricted key, and manages only such keys', async () => {
    const orm = env.service.db.orm;
    const a = await createDomain(orm, t.orgId, `ra-${Date.now()}.example.test`, { verified: true });
    const b = await createDomain(orm, t.orgId, `rb-${Date.now()}.example.test`, { verified: true });
    const restricted = (
      await createKey(orm, t.orgId, { name: 'ops-a', permission: 'admin', mode: 'live', domainIds: [a.id], rateLimit: 1000 })
    ).token;
    const call = (method: string, path: string, body?: unknown) => request(env.url, method, path, { token: restricted, body });

    const unrestricted = await call('POST', '/api/v1/keys', { name: 'all', permission: 'send', mode: 'live' });
    assert.equal(unrestricted.status, 403);
    assert.equal(unrestricted.body.error.code, 'forbidden_domain');
    const foreign = await call('POST', '/api/v1/keys', { name: 'b', permission: 'send', mode: 'live', domain_ids: [a.id, b.id] });
    assert.equal(foreign.status, 403);
    assert.equal(foreign.body.error.code, 'forbidden_domain');
    const ok = await call('POST', '/api/v1/keys', { name: 'a-only', permission: 'send', mode: 'live', domain_ids: [a.id] });
    assert.equal(ok.status, 201);
    assert.deepEqual(ok.body.domain_ids, [a.id]);

    const visible = (await call('GET', '/api/v1/keys')).body.data.map((k: { id: string }) => k.id);
    assert.ok(visible.includes(ok.body.id));
    const wide = await t.call('POST', '/api/v1/keys', { as: 'admin', body: { name: 'wide', permission: 'send', mode: 'live' } });
    assert.ok(!visible.includes(wide.body.id), 'an unrestricted key is outside a restricted caller');
    for (const [method, path] of [
      ['GET', `/api/v1/keys/${wide.body.id}`],
      ['POST', `/api/v1/keys/${wide.body.id}/rotate`],
      ['DELETE', `/api/v1/keys/${wide.body.id}`],
    ]) {
      assert.equal((await call(method, path)).status, 404, `${method} ${path}`);
    }
    assert.equal((await sendWith(wide.body.token)).status, 200, 'the unrestricted key is untouched');
  });

  it('rotates: the new token works at once, the old one for 24 hours, then no more', async () => {
    const created = await t.call('POST', '/api/v1/keys', {
      as: 'admin',
      body: { name: 'rotating', permission: 'send', mode: 'live', rate_limit: 100 },
    });
    const oldToken = created.body.token;
    const rotated = await t.call('POST', `/api/v1/keys/${created.body.id}/rotate`, { as: 'admin' });
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    assert.notEqual(rotated.body.token, oldToken);
    assert.equal(rotated.body.id, created.body.id);
    const grace = Date.parse(rotated.body.previous_token_expires_at) - Date.now();
    assert.ok(grace > 23.9 * 3600_000 && grace <= 24 * 3600_000, `grace ${grace}`);
    assert.equal((await sendWith(rotated.body.token)).status, 200);
    assert.equal((await sendWith(oldToken)).status, 200);
    // 24 hours later (moved in the database rather than waited for):
    await expire(oldToken);
    assert.equal((await sendWith(oldToken)).status, 401);
    assert.equal((await sendWith(rotated.body.token)).status, 200);
  });

  it('rotating twice within a day keeps each superseded token valid for its own 24 hours', async () => {
    const created = await t.call('POST', '/api/v1/keys', {
      as: 'admin',
      body: { name: 'twice', permission: 'send', mode: 'live', rate_limit: 100 },
    });
    const first = created.body.token;
    const second = (await t.call('POST', `/api/v1/keys/${created.body.id}/rotate`, { as: 'admin' })).body.token;
    const rotated = await t.call('POST', `/api/v1/keys/${created.body.id}/rotate`, { as: 'admin' });
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));
    const third = rotated.body.token;
    for (const token of [first, second, third]) assert.equal((await sendWith(token)).status, 200, 'every token of the day still works');
    assert.deepEqual(
      rotated.body.previous_tokens.map((p: { token_prefix: string }) => p.token_prefix),
      [second.slice(0, 13), first.slice(0, 13)],
      'both superseded tokens are listed, newest first',
    );
    assert.equal(rotated.body.token_prefix, third.slice(0, 13));
    // The first token's 24 hours end; the second keeps its own.
    await expire(first);
    assert.equal((await sendWith(first)).status, 401);
    assert.equal((await sendWith(second)).status, 200);
    assert.equal((await sendWith(third)).status, 200);
    const shown = await t.call('GET', `/api/v1/keys/${created.body.id}`, { as: 'admin' });
    assert.deepEqual(
      shown.body.previous_tokens.map((p: { token_prefix: string }) => p.token_prefix),
      [second.slice(0, 13)],
    );
  });

  it('concurrent rotations: each answers a working token or 409 rotation_conflict, and no token is lost', async () => {
    const created = await t.call('POST', '/api/v1/keys', {
      as: 'admin',
      body: { name: 'racing', permission: 'send', mode: 'live', rate_limit: 100 },
    });
    const rs = await Promise.all(
      Array.from({ length: 5 }, () => t.call('POST', `/api/v1/keys/${created.body.id}/rotate`, { as: 'admin' })),
    );
    assert.ok(rs.some((r) => r.status === 200));
    for (const r of rs) {
      if (r.status === 200) assert.equal((await sendWith(r.body.token)).status, 200);
      else assert.deepEqual([r.status, r.body.error.code], [409, 'rotation_conflict']);
    }
    assert.equal((await sendWith(created.body.token)).status, 200, 'the original token keeps its 24 hours');
    const current = await env.service.db.orm.em
      .fork()
      .getConnection()
      .execute(`select count(*)::int as n from api_key_tokens where api_key_id = ? and expires_at is null`, [created.body.id]);
    assert.equal(current[0].n, 1, 'one current token');
  });

  it('revokes at once, for the current and the rotated-out token; a revoked key cannot rotate', async () => {
    const created = await t.call('POST', '/api/v1/keys', {
      as: 'admin',
      body: { name: 'leaked', permission: 'send', mode: 'live', rate_limit: 100 },
    });
    const rotated = await t.call('POST', `/api/v1/keys/${created.body.id}/rotate`, { as: 'admin' });
    const revoked = await t.call('DELETE', `/api/v1/keys/${created.body.id}`, { as: 'admin' });
    assert.equal(revoked.status, 200);
    assert.equal(revoked.body.revoked, true);
    assert.ok(revoked.body.revoked_at);
    assert.equal((await sendWith(rotated.body.token)).status, 401);
    assert.equal((await sendWith(created.body.token)).status, 401);
    assert.equal((await t.call('DELETE', `/api/v1/keys/${created.body.id}`, { as: 'admin' })).status, 200, 'revoking twice is harmless');
    const again = await t.call('POST', `/api/v1/keys/${created.body.id}/rotate`, { as: 'admin' });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'key_revoked');
  });

  it("keeps organizations apart: another organization's key is 404 everywhere", async () => {
    const theirs = await other.call('POST', '/api/v1/keys', { as: 'admin', body: { name: 'theirs', permission: 'send', mode: 'live' } });
    for (const [method, path] of [
      ['GET', `/api/v1/keys/${theirs.body.id}`],
      ['POST', `/api/v1/keys/${theirs.body.id}/rotate`],
      ['DELETE', `/api/v1/keys/${theirs.body.id}`],
      ['GET', '/api/v1/keys/not-an-id'],
    ]) {
      const res = await t.call(method, path, { as: 'admin' });
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.equal(res.body.error.code, 'not_found');
    }
    const listed = await t.call('GET', '/api/v1/keys', { as: 'admin' });
    assert.ok(!listed.body.data.some((k: { id: string }) => k.id === theirs.body.id));
    assert.equal((await other.call('GET', `/api/v1/keys/${theirs.body.id}`, { as: 'admin' })).status, 200);
  });

  it('needs an ADMIN live key: SEND keys get forbidden, test keys test_key_not_allowed', async () => {
    for (const [as, code] of [
      ['send', 'forbidden'],
      ['test', 'test_key_not_allowed'],
    ] as const) {
      for (const [method, path] of [
        ['GET', '/api/v1/keys'],
        ['POST', '/api/v1/keys'],
        ['GET', '/api/v1/audit-log'],
        ['PATCH', '/api/v1/organization'],
      ]) {
        const res = await t.call(method, path, { as, body: method === 'GET' ? undefined : {} });
        assert.equal(res.status, 403, `${as} ${method} ${path}`);
        assert.equal(res.body.error.code, code);
      }
    }
  });
});
