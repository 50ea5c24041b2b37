import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { request, type ApiResponse } from '../support/http';
import { createKey } from '../../core/provisioning';
import { runSvc, freePort, waitHealthy, type Child } from '../support/child';
import { tempDir } from '../support/pg';
import { sleep } from '../support/wait';

/**
 * Runs `fire` right after a second turns, and again if it spilled into the next second, so the
 * assertions see exactly one rate window (PostgreSQL's clock and ours are the same machine's).
 */
async function inOneSecond<T>(fire: () => Promise<T>): Promise<T> {
  for (let i = 0; i < 6; i++) {
    await sleep(1000 - (Date.now() % 1000) + 30);
    const start = Date.now();
    const result = await fire();
    if (Math.floor(start / 1000) === Math.floor(Date.now() / 1000)) return result;
  }
  throw new Error('could not fit the burst into one second');
}

const statuses = (rs: ApiResponse[]) => rs.map((r) => r.status);
const ok = (rs: ApiResponse[]) => rs.filter((r) => r.status === 200).length;

describe('API: per-key rate limits', function () {
  this.timeout(90_000);
  let env: TestEnv;
  let t: Tenant;
  const newKey = async (rateLimit?: number) =>
    (await createKey(env.service.db.orm, t.orgId, { name: 'rl', permission: 'send', mode: 'live', rateLimit })).token;
  const list = (base: string, token: string) => request(base, 'GET', '/api/v1/emails?limit=1', { token });
  const item = (i: number) => ({
    from: `app@${t.domain}`,
    to: `r${i}@example.com`,
    subject: 's',
    text: 't',
    scheduled_at: new Date(Date.now() + 86_400_000).toISOString(),
  });

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
  });

  it('allows 10 requests per second by default; the rest get 429 rate_limited with Retry-After: 1', async () => {
    const token = await newKey();
    const rs = await inOneSecond(() => Promise.all(Array.from({ length: 16 }, () => list(env.url, token))));
    assert.equal(ok(rs), 10, statuses(rs).join(','));
    const refused = rs.filter((r) => r.status === 429);
    assert.equal(refused.length, 6);
    for (const r of refused) {
      assert.equal(r.body.error.code, 'rate_limited');
      assert.equal(r.headers.get('retry-after'), '1');
    }
    // The next second starts afresh.
    await sleep(1000);
    assert.equal((await list(env.url, token)).status, 200);
  });

  it("applies a key's own cap", async () => {
    const token = await newKey(3);
    const rs = await inOneSecond(() => Promise.all(Array.from({ length: 8 }, () => list(env.url, token))));
    assert.equal(ok(rs), 3, statuses(rs).join(','));
  });

  it('charges sends, and refused sends too (small or large body): over the cap, a bad body gets 429 rather than 422, and nothing is stored', async () => {
    const token = await newKey(2);
    const send = (body: unknown) => request(env.url, 'POST', '/api/v1/emails', { token, body });
    const [first, third] = [`first-${Date.now()}@example.com`, `third-${Date.now()}@example.com`];
    const rs = await inOneSecond(async () => [
      await send({ ...item(1), to: first }),
      await send({ to: 'nobody', html: 'x'.repeat(300 * 1024) }),
      await send({ ...item(2), to: third }),
      await send({ to: 'nobody' }),
    ]);
    assert.deepEqual(statuses(rs), [200, 422, 429, 429], JSON.stringify(rs.map((r) => r.body)));
    assert.equal(rs[3].body.error.code, 'rate_limited');
    assert.equal(rs[2].headers.get('retry-after'), '1');
    const stored = (await request(env.url, 'GET', '/api/v1/emails?limit=100', { token: t.sendKey })).body.data.map(
      (e: { to: string[] }) => e.to[0],
    );
    assert.ok(stored.includes(first) && !stored.includes(third), 'the send refused with 429 stored nothing');
  });

  it('charges keys separately', async () => {
    const [a, b] = [await newKey(2), await newKey(2)];
    const rs = await inOneSecond(() => Promise.all([a, a, a, b, b, b].map((k) => list(env.url, k))));
    assert.deepEqual(statuses(rs).sort(), [200, 200, 200, 200, 429, 429]);
  });

  it('a batch costs one per message: a 100-item batch passes in an empty second even at the default cap, a concurrent one gets 429', async () => {
    const token = await newKey();
    const batch = (n: number) =>
      request(env.url, 'POST', '/api/v1/emails/batch', { token, body: Array.from({ length: n }, (_, i) => item(i)) });
    const rs = await inOneSecond(() => Promise.all([batch(100), batch(100)]));
    assert.deepEqual(statuses(rs).sort(), [200, 429], JSON.stringify(rs.map((r) => r.body).filter((b) => b?.error)));
    const passed = rs.find((r) => r.status === 200)!;
    assert.equal(passed.body.data.length, 100);
    assert.ok(passed.body.data.every((d: { id?: string }) => d.id));
  });

  it('a batch reserves 100 before its body is read: at the default cap, of two concurrent 3-item batches one passes and the other gets 429, storing nothing', async () => {
    const token = await newKey();
    const marker = `reserve-${Date.now()}`;
    const three = (tag: string) =>
      request(env.url, 'POST', '/api/v1/emails/batch', {
        token,
        body: [1, 2, 3].map((i) => ({ ...item(i), subject: `${marker}-${tag}` })),
      });
    const rs = await inOneSecond(() => Promise.all([three('a'), three('b')]));
    assert.deepEqual(statuses(rs).sort(), [200, 429], JSON.stringify(rs.map((r) => r.body)));
    const refused = rs.find((r) => r.status === 429)!;
    assert.equal(refused.body.error.code, 'rate_limited');
    assert.equal(refused.headers.get('retry-after'), '1');
    const subjects = (await request(env.url, 'GET', '/api/v1/emails?limit=100', { token: t.sendKey })).body.data.map(
      (e: { subject: string }) => e.subject,
    );
    assert.equal(subjects.filter((s: string) => s.startsWith(marker)).length, 3, 'only the admitted batch stored its 3 messages');
  });

  it('a batch after any other request in the same second gets 429 at the default cap; in an empty second it passes', async () => {
    const token = await newKey();
    const batch = () => request(env.url, 'POST', '/api/v1/emails/batch', { token, body: [item(1), item(2)] });
    const rs = await inOneSecond(async () => [await list(env.url, token), await batch()]);
    assert.deepEqual(statuses(rs), [200, 429]);
    await sleep(1000 - (Date.now() % 1000) + 30);
    assert.equal((await batch()).status, 200);
  });

  it('a batch refused for its rate counts as one request, not its reservation of 100', async () => {
    const token = await newKey();
    const batch = () => request(env.url, 'POST', '/api/v1/emails/batch', { token, body: [item(1)] });
    const rs = await inOneSecond(async () => {
      const out = [await list(env.url, token), await batch()];
      for (let i = 0; i < 9; i++) out.push(await list(env.url, token));
      return out;
    });
    // 1 request, 1 refused batch, then 8 more fit under the cap of 10; the 9th does not.
    assert.deepEqual(statuses(rs), [200, 429, 200, 200, 200, 200, 200, 200, 200, 200, 429]);
  });

  it('a 4-item batch costs 4: 6 more requests fit in the same second', async () => {
    const token = await newKey();
    const rs = await inOneSecond(async () => {
      const b = await request(env.url, 'POST', '/api/v1/emails/batch', { token, body: [item(1), item(2), item(3), item(4)] });
      const singles = await Promise.all(Array.from({ length: 8 }, () => list(env.url, token)));
      return [b, ...singles];
    });
    assert.equal(rs[0].status, 200);
    assert.equal(ok(rs.slice(1)), 6, statuses(rs).join(','));
  });

  describe('across API processes sharing one database', () => {
    let child: Child | undefined;
    let second: string;

    before(async function () {
      this.timeout(90_000);
      const port = await freePort();
      second = `http://127.0.0.1:${port}`;
      child = runSvc(['start'], { DATABASE_URL: env.service.db.url, PORT: String(port), DATA_DIR: tempDir('svc-rl'), DEV_SMTP_PORT: '0' });
      await waitHealthy(second, child);
    });

    after(async () => {
      if (child && child.proc.exitCode === null) {
        child.proc.kill('SIGTERM');
        await child.exited;
      }
    });

    it('enforces one limit for a key whichever process answers', async () => {
      const token = await newKey(6);
      const rs = await inOneSecond(() => Promise.all(Array.from({ length: 12 }, (_, i) => list(i % 2 ? second : env.url, token))));
      // A limit kept per process would admit 6 in each, 12 in all.
      assert.equal(ok(rs), 6, statuses(rs).join(','));
    });
  });
});
