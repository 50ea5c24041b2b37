import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { WebhookReceiver, type Received } from '../support/webhook-receiver';
import { request } from '../support/http';
import { waitFor, sleep } from '../support/wait';
import { createApp } from '../../api/app';
import { GroupStore } from '../../core/emails/group-store';
import { WEBHOOK_EVENTS } from '../../core/webhooks/events';
import { DBOS } from '@dbos-inc/dbos-sdk';
import { webhookDeliveryWorkflowId } from '../../workflows/webhook-delivery';
import { createWebhookDeliveryActivities } from '../../activities/webhook-delivery';
import { randomBytes } from 'node:crypto';
import { createRecipientLinks } from '../../core/recipient-links';

let hooks = 0;

describe('API: signed webhooks', function () {
  this.timeout(90_000);
  let env: TestEnv;
  let t: Tenant;
  let receiver: WebhookReceiver;

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
    receiver = new WebhookReceiver();
    await receiver.start();
  });
  after(async () => receiver.stop());

  /** Registers an endpoint at its own path of the receiver. */
  async function register(extra: Record<string, unknown> = {}, tenant = t) {
    const path = `/hook-${++hooks}`;
    const res = await tenant.call('POST', '/api/v1/webhooks', { as: 'admin', body: { url: `${receiver.url}${path}`, ...extra } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return { ...res.body, path } as { id: string; secret: string; path: string; events: string[] | null };
  }

  async function sendTest(to: string, extra: Record<string, unknown> = {}, as: 'test' | 'send' = 'test') {
    const res = await t.call('POST', '/api/v1/emails', {
      as,
      body: { from: `App <app@${t.domain}>`, to, subject: 'Hello', text: 'hi', tags: [{ name: 'flow', value: 'signup' }], ...extra },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.id as string;
  }

  const types = (list: Received[]) => list.map((r) => r.json.type).sort();
  const deliveries = async (id: string, query = '') =>
    (await t.call('GET', `/api/v1/webhooks/${id}/deliveries${query}`, { as: 'admin' })).body;

  it('registers an endpoint: the secret is shown once, events are checked, writes are audit-logged', async () => {
    const hook = await register({ events: ['email.bounced', 'email.complained'], description: 'ops' });
    assert.match(hook.secret, /^whsec_[A-Za-z0-9+/]+=*$/);
    const keyBytes = Buffer.from(hook.secret.slice(6), 'base64').length;
    assert.ok(keyBytes >= 24 && keyBytes <= 64, `secret of ${keyBytes} bytes`);
    assert.deepEqual(hook.events, ['email.bounced', 'email.complained']);
    const got = await t.call('GET', `/api/v1/webhooks/${hook.id}`, { as: 'admin' });
    assert.equal(got.status, 200);
    assert.equal(got.body.object, 'webhook');
    assert.equal(got.body.enabled, true);
    assert.equal('secret' in got.body, false, 'never shown again');
    assert.ok(!JSON.stringify((await t.call('GET', '/api/v1/webhooks', { as: 'admin' })).body).includes(hook.secret));

    for (const [body, field] of [
      [{ url: `${receiver.url}/x`, events: ['email.exploded'] }, 'events[0]'],
      [{ url: `${receiver.url}/x`, events: [] }, 'events'],
      [{ url: 'ftp://example.com/hook' }, 'url'],
      [{ url: 'not a url' }, 'url'],
      [{ url: 'https://user:pw@example.com/hook' }, 'url'],
      [{ url: `${receiver.url}/x`, secret: 'mine' }, undefined],
    ] as const) {
      const res = await t.call('POST', '/api/v1/webhooks', { as: 'admin', body });
      assert.equal(res.status, 422, JSON.stringify(body));
      assert.equal(res.body.error.code, 'validation_error');
      if (field) assert.ok(JSON.stringify(res.body.error).includes(field), JSON.stringify(res.body.error));
    }
    assert.equal((await t.call('POST', '/api/v1/webhooks', { body: { url: `${receiver.url}/x` } })).status, 403, 'SEND keys cannot');
    assert.equal(
      (await t.call('POST', '/api/v1/webhooks', { as: 'test', body: { url: `${receiver.url}/x` } })).body.error.code,
      'test_key_not_allowed',
    );

    const patched = await t.call('PATCH', `/api/v1/webhooks/${hook.id}`, { as: 'admin', body: { events: null, enabled: false } });
    assert.equal(patched.status, 200);
    assert.equal(patched.body.events, null);
    assert.equal(patched.body.disabled_reason, 'api');
    const log = (await t.call('GET', '/api/v1/audit-log?limit=100', { as: 'admin' })).body.data.filter(
      (e: { target: { id: string } }) => e.target?.id === hook.id,
    );
    assert.deepEqual(log.map((e: { action: string }) => e.action).sort(), ['webhook.created', 'webhook.updated']);
    assert.equal(JSON.stringify(log).includes(hook.secret), false);
    const del = await t.call('DELETE', `/api/v1/webhooks/${hook.id}`, { as: 'admin' });
    assert.equal(del.body.deleted, true);
    assert.equal((await t.call('GET', `/api/v1/webhooks/${hook.id}`, { as: 'admin' })).status, 404);
    const other = await newTenant(env);
    const theirs = await register({}, other);
    assert.equal((await t.call('GET', `/api/v1/webhooks/${theirs.id}`, { as: 'admin' })).status, 404, 'other organizations are not seen');
    await other.call('DELETE', `/api/v1/webhooks/${theirs.id}`, { as: 'admin' });
  });

  it('delivers signed events that standardwebhooks verifies, filtered by the endpoint, same payload shape in test and live mode', async () => {
    const hook = await register({ events: ['email.sent', 'email.delivered'] });
    const wh = new Webhook(hook.secret);
    const to = `someone-${Date.now()}@example.com`;
    const testId = await sendTest(to);
    const got = await waitFor(async () => (receiver.at(hook.path).length >= 2 ? receiver.at(hook.path) : undefined), 'two deliveries');
    await sleep(300);
    assert.deepEqual(types(receiver.at(hook.path)), ['email.delivered', 'email.sent'], 'queued is not subscribed');
    for (const r of got) {
      const verified = wh.verify(r.body, r.headers) as Received['json'];
      assert.equal(verified.data.email_id, testId);
      assert.match(r.headers['webhook-id'], /^[0-9a-f-]{36}$/);
      assert.match(r.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=*$/);
      assert.ok(Math.abs(Number(r.headers['webhook-timestamp']) - Date.now() / 1000) < 30);
    }
    assert.throws(() => new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(got[0].body, got[0].headers));
    const sent = got.find((r) => r.json.type === 'email.sent')!.json;
    assert.deepEqual(Object.keys(sent), ['type', 'created_at', 'data']);
    assert.match(sent.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.deepEqual(
      Object.keys(sent.data),
      ['email_id', 'from', 'to', 'subject', 'recipient', 'mode', 'kind', 'tags', 'sequence'],
      'in order',
    );
    assert.ok(!got[0].body.includes(' : '), 'compact JSON');
    assert.deepEqual(sent.data, {
      email_id: testId,
      from: `App <app@${t.domain}>`,
      to: [to],
      subject: 'Hello',
      recipient: to,
      mode: 'test',
      kind: null,
      tags: [{ name: 'flow', value: 'signup' }],
      sequence: sent.data.sequence,
    });
    assert.ok(Number.isSafeInteger(sent.data.sequence) && sent.data.sequence > 0);

    // A live message (to the sink) gives the same shape, with mode live.
    const liveTo = `live-${Date.now()}@example.com`;
    const liveId = await sendTest(liveTo, {}, 'send');
    const live = await waitFor(
      async () => receiver.at(hook.path).find((r) => r.json.type === 'email.sent' && r.json.data.email_id === liveId),
      'live sent event',
    );
    assert.deepEqual(Object.keys(live.json.data), Object.keys(sent.data));
    assert.equal(live.json.data.mode, 'live');

    const list = await deliveries(hook.id);
    assert.equal(list.object, 'list');
    assert.ok(list.data.every((d: { status: string; attempts: number }) => d.status === 'succeeded' && d.attempts === 1));
    assert.ok(
      list.data.some((d: { id: string }) => d.id === got[0].headers['webhook-id']),
      'webhook-id is the delivery id',
    );
    assert.equal(list.data[0].last_status_code, 200);
    const times = list.data.map((d: { created_at: string }) => d.created_at);
    assert.deepEqual([...times].sort().reverse(), times, 'newest first');
  });

  it('a hard bounce in test mode carries bounce_type; an endpoint with no filter gets every event', async () => {
    const hook = await register();
    const to = `bounce+${Date.now()}@example.com`;
    const id = await sendTest(to);
    await waitFor(async () => receiver.at(hook.path).some((r) => r.json.type === 'email.bounced'), 'bounce event');
    await sleep(300);
    const mine = receiver.at(hook.path).filter((r) => r.json.data.email_id === id);
    assert.deepEqual(types(mine), ['email.bounced', 'email.queued', 'email.sent']);
    const bounced = mine.find((r) => r.json.type === 'email.bounced')!;
    assert.equal(bounced.json.data.bounce_type, 'hard');
    assert.deepEqual(Object.keys(bounced.json.data).slice(-3), ['tags', 'sequence', 'bounce_type'], 'optional fields after the others');
    // Deliveries may arrive in any order; `sequence` puts them back in the order the message lists its events (issue 51).
    const bySequence = [...mine].sort((a, b) => a.json.data.sequence - b.json.data.sequence);
    const listed = (await t.call('GET', `/api/v1/emails/${id}`)).body.events.map((e: { type: string }) => `email.${e.type}`);
    assert.deepEqual(
      bySequence.map((r) => r.json.type),
      listed,
    );
    assert.deepEqual(listed, ['email.queued', 'email.sent', 'email.bounced']);
    assert.equal('bounce_type' in mine.find((r) => r.json.type === 'email.sent')!.json.data, false, 'only when present');
    await t.call('DELETE', `/api/v1/webhooks/${hook.id}`, { as: 'admin' });
  });

  it('contact events: created, updated (only when the contact changed) and deleted', async () => {
    const hook = await register({ events: ['contact.created', 'contact.updated', 'contact.deleted'] });
    const email = `person-${Date.now()}@example.com`;
    const created = await t.call('POST', '/api/v1/contacts', { body: { email, first_name: 'Ada' } });
    assert.ok([200, 201].includes(created.status), JSON.stringify(created.body));
    await t.call('POST', '/api/v1/contacts', { body: { email, first_name: 'Ada' } });
    await t.call('POST', '/api/v1/contacts', { body: { email, first_name: 'Grace' } });
    const full = await t.call('DELETE', `/api/v1/contacts/${encodeURIComponent(email)}`, { as: 'admin' });
    assert.equal(full.status, 200, JSON.stringify(full.body));
    const got = await waitFor(async () => (receiver.at(hook.path).length >= 3 ? receiver.at(hook.path) : undefined), 'contact events');
    await sleep(300);
    // Arrival order is not event order (docs/webhooks.md): several deliveries are in flight at once.
    assert.deepEqual(
      receiver
        .at(hook.path)
        .map((r) => [r.json.type, r.json.data.first_name])
        .sort(),
      [
        ['contact.created', 'Ada'],
        ['contact.deleted', 'Grace'],
        ['contact.updated', 'Grace'],
      ],
    );
    assert.ok(got.every((r) => r.json.data.email === email));
    await t.call('DELETE', `/api/v1/webhooks/${hook.id}`, { as: 'admin' });
  });

  it('retries after a 500 with the same webhook-id, then succeeds', async () => {
    const hook = await register({ events: ['email.sent'] });
    let calls = 0;
    receiver.respond = (r) => (r.path === hook.path && ++calls === 1 ? 500 : 200);
    try {
      await sendTest(`retry-${Date.now()}@example.com`);
      const first = await waitFor(
        async () => (await deliveries(hook.id)).data.find((d: any) => d.attempts === 1 && d.status === 'pending'),
        'a failed first attempt',
      );
      assert.equal(first.last_status_code, 500);
      assert.equal(first.last_response, 'refused with 500');
      const wait = Date.parse(first.next_attempt_at) - Date.now();
      assert.ok(wait > 0 && wait <= 5_000, `next attempt in ${wait} ms`);
      const done = await waitFor(async () => {
        const d = (await deliveries(hook.id)).data[0];
        return d.status === 'succeeded' ? d : undefined;
      }, 'the retry');
      assert.equal(done.attempts, 2);
      // The same path as the Temporal replay fixtures: the first attempt in a WebhookFirstAttempts
      // batch, which hands the delivery back; a WebhookDelivery run waits the 5 s and makes the second.
      const runId = webhookDeliveryWorkflowId(done.id, 1);
      const status = await waitFor(async () => {
        const st = await DBOS.getWorkflowStatus(runId);
        return st?.status === 'SUCCESS' ? st : undefined;
      }, 'the run to end');
      assert.deepEqual(status.output, { status: 'succeeded', attempts: 2 });
      const steps = ((await DBOS.listWorkflowSteps(runId)) ?? []).map((st) => st.name).filter((n) => n === 'attemptWebhookDelivery');
      assert.equal(steps.length, 1, 'the run made the second attempt only');
      const got = receiver.at(hook.path);
      assert.equal(got.length, 2);
      assert.equal(got[0].headers['webhook-id'], got[1].headers['webhook-id']);
      assert.equal(got[0].body, got[1].body, 'the same bytes on every attempt');
      assert.ok(got[1].at - got[0].at >= 4_500, 'after the 5 s step of the schedule');
    } finally {
      receiver.respond = () => 200;
    }
  });

  it('a batch step run again (after a crash) skips the deliveries it already attempted: no second POST', async () => {
    const hook = await register({ events: ['email.sent'] });
    receiver.respond = (r) => (r.path === hook.path ? 500 : 200);
    try {
      await sendTest(`rerun-${Date.now()}@example.com`);
      const handedBack = await waitFor(
        async () => (await deliveries(hook.id)).data.find((d: any) => d.attempts === 1 && d.status === 'pending'),
        'a failed first attempt',
      );
      // The batch's activity as the engine would run it again on recovery, with the same input.
      const posts: string[] = [];
      const activities = createWebhookDeliveryActivities({
        orm: env.service.db.orm,
        webhooks: {
          post: async (_e, url) => {
            posts.push(url);
            return { statusCode: 200, error: null, body: '' };
          },
          close: () => undefined,
        },
        secrets: { encrypt: (x) => x, decrypt: (x) => x },
        clock: { now: () => new Date() },
        log: pino({ level: 'silent' }),
      });
      const again = await activities.attemptWebhookBatch({ deliveries: [{ deliveryId: handedBack.id, run: 1 }], retryInMs: 5_000 });
      assert.deepEqual(again, { succeeded: 0, failed: 0, handedBack: 0, skipped: 1 });
      assert.deepEqual(posts, []);
      assert.equal(receiver.at(hook.path).length, 1);
    } finally {
      receiver.respond = () => 200;
    }
    await t.call('DELETE', `/api/v1/webhooks/${hook.id}`, { as: 'admin' });
  });

  it('410 Gone disables the endpoint at once, audit-logged with the reason; it then gets no new deliveries', async () => {
    const hook = await register({ events: ['email.sent'] });
    receiver.respond = (r) => (r.path === hook.path ? 410 : 200);
    try {
      await sendTest(`gone-${Date.now()}@example.com`);
      const w = await waitFor(async () => {
        const got = (await t.call('GET', `/api/v1/webhooks/${hook.id}`, { as: 'admin' })).body;
        return got.enabled === false ? got : undefined;
      }, 'the endpoint disabled');
      assert.equal(w.disabled_reason, 'gone');
      const [d] = (await deliveries(hook.id)).data;
      assert.equal(d.status, 'failed');
      assert.equal(d.last_status_code, 410);
      const log = (await t.call('GET', '/api/v1/audit-log?limit=100', { as: 'admin' })).body.data;
      const entry = log.find((e: any) => e.action === 'webhook.disabled' && e.target.id === hook.id);
      assert.ok(entry, 'audit entry');
      assert.equal(entry.details.reason, 'gone');
      await sendTest(`gone-again-${Date.now()}@example.com`);
      await sleep(1000);
      assert.equal((await deliveries(hook.id)).data.length, 1, 'no delivery for a disabled endpoint');
      assert.equal(receiver.at(hook.path).length, 1);
      const retry = await t.call('POST', `/api/v1/webhooks/${hook.id}/deliveries/${d.id}/retry`, { as: 'admin' });
      assert.equal(retry.status, 409);
      assert.equal(retry.body.error.code, 'webhook_disabled');
    } finally {
      receiver.respond = () => 200;
    }
  });

  it('an endpoint whose deliveries have failed for 5 days is disabled at its next failure, audit-logged', async () => {
    const hook = await register({ events: ['email.sent'] });
    receiver.respond = (r) => (r.path === hook.path ? 500 : 200);
    try {
      await sendTest(`failing-${Date.now()}@example.com`);
      const [d] = await waitFor(async () => {
        const list = (await deliveries(hook.id)).data;
        return list[0]?.attempts === 1 ? list : undefined;
      }, 'a failed first attempt');
      const db = env.service.db.orm.em.fork().getConnection();
      const [streak] = await db.execute(`select failing_since from webhook_endpoints where id = ?`, [hook.id]);
      assert.ok(streak.failing_since, 'the failure streak started');
      // Four days in: another failure keeps it enabled.
      await db.execute(`update webhook_endpoints set failing_since = now() - interval '4 days' where id = ?`, [hook.id]);
      await t.call('POST', `/api/v1/webhooks/${hook.id}/deliveries/${d.id}/retry`, { as: 'admin' });
      await waitFor(async () => (await deliveries(hook.id)).data[0].attempts === 2, 'the second attempt');
      assert.equal((await t.call('GET', `/api/v1/webhooks/${hook.id}`, { as: 'admin' })).body.enabled, true);
      await db.execute(`update webhook_endpoints set failing_since = now() - interval '5 days 1 minute' where id = ?`, [hook.id]);
      await t.call('POST', `/api/v1/webhooks/${hook.id}/deliveries/${d.id}/retry`, { as: 'admin' });
      const w = await waitFor(async () => {
        const got = (await t.call('GET', `/api/v1/webhooks/${hook.id}`, { as: 'admin' })).body;
        return got.enabled === false ? got : undefined;
      }, 'disabled after 5 days of failures');
      assert.equal(w.disabled_reason, 'failing');
      const log = (await t.call('GET', '/api/v1/audit-log?limit=100', { as: 'admin' })).body.data;
      assert.ok(log.some((e: any) => e.action === 'webhook.disabled' && e.target.id === hook.id && e.details.reason === 'failing'));
    } finally {
      receiver.respond = () => 200;
    }
  });

  it('manual retry sends a delivery again with its webhook-id; recover re-queues the failed ones since a time', async () => {
    const hook = await register({ events: ['email.sent'] });
    receiver.respond = (r) => (r.path === hook.path ? 503 : 200);
    const since = new Date(Date.now() - 1000).toISOString();
    try {
      await sendTest(`recover-${Date.now()}@example.com`);
      await waitFor(async () => (await deliveries(hook.id)).data[0]?.attempts === 1, 'first attempt');
      // Disabled while its retry waits: the next attempt sends nothing and fails it.
      await t.call('PATCH', `/api/v1/webhooks/${hook.id}`, { as: 'admin', body: { enabled: false } });
      const failed = await waitFor(async () => {
        const d = (await deliveries(hook.id, '?status=failed')).data[0];
        return d ?? undefined;
      }, 'failed while disabled');
      assert.equal(failed.last_error, 'the endpoint is disabled');
      assert.equal(receiver.at(hook.path).length, 1);
      receiver.respond = () => 200;
      await t.call('PATCH', `/api/v1/webhooks/${hook.id}`, { as: 'admin', body: { enabled: true } });
      const rec = await t.call('POST', `/api/v1/webhooks/${hook.id}/recover`, { as: 'admin', body: { since } });
      assert.equal(rec.status, 202, JSON.stringify(rec.body));
      assert.equal(rec.body.requeued, 1);
      await waitFor(async () => (await deliveries(hook.id)).data[0].status === 'succeeded', 'recovered');
      assert.equal(receiver.at(hook.path).length, 2);

      const retried = await t.call('POST', `/api/v1/webhooks/${hook.id}/deliveries/${failed.id}/retry`, { as: 'admin' });
      assert.equal(retried.status, 202);
      assert.equal(retried.body.status, 'pending');
      await waitFor(async () => receiver.at(hook.path).length === 3, 'manual retry');
      const ids = new Set(receiver.at(hook.path).map((r) => r.headers['webhook-id']));
      assert.deepEqual([...ids], [failed.id]);
      const none = await t.call('POST', `/api/v1/webhooks/${hook.id}/recover`, { as: 'admin', body: { since: '2999-01-01T00:00:00Z' } });
      assert.equal(none.body.requeued, 0);
      assert.equal(
        (await t.call('POST', `/api/v1/webhooks/${hook.id}/recover`, { as: 'admin', body: { since: 'yesterday' } })).status,
        422,
      );
      const unknown = await t.call('POST', `/api/v1/webhooks/${hook.id}/deliveries/019a0000-0000-7000-8000-000000000000/retry`, {
        as: 'admin',
      });
      assert.equal(unknown.status, 404);
    } finally {
      receiver.respond = () => 200;
    }
  });

  it('rotating the secret signs with both for 24 h: receivers holding either verify', async () => {
    const hook = await register({ events: ['email.sent'] });
    const rotated = await t.call('POST', `/api/v1/webhooks/${hook.id}/rotate-secret`, { as: 'admin' });
    assert.equal(rotated.status, 200);
    assert.notEqual(rotated.body.secret, hook.secret);
    const hours = (Date.parse(rotated.body.previous_secret_expires_at) - Date.now()) / 3_600_000;
    assert.ok(hours > 23.9 && hours <= 24, String(hours));
    await sendTest(`rotate-${Date.now()}@example.com`);
    const [r] = await waitFor(async () => (receiver.at(hook.path).length ? receiver.at(hook.path) : undefined), 'delivery after rotation');
    assert.equal(r.headers['webhook-signature'].split(' ').length, 2);
    assert.ok(new Webhook(rotated.body.secret).verify(r.body, r.headers));
    assert.ok(new Webhook(hook.secret).verify(r.body, r.headers));
    // After the 24 h overlap only the new secret signs.
    await env.service.db.orm.em
      .fork()
      .getConnection()
      .execute(`update webhook_endpoints set previous_secret_until = now() - interval '1 second' where id = ?`, [hook.id]);
    await sendTest(`rotate-after-${Date.now()}@example.com`);
    const later = await waitFor(async () => receiver.at(hook.path)[1], 'delivery after the overlap');
    assert.equal(later.headers['webhook-signature'].split(' ').length, 1);
    assert.ok(new Webhook(rotated.body.secret).verify(later.body, later.headers));
    assert.throws(() => new Webhook(hook.secret).verify(later.body, later.headers));
    await t.call('DELETE', `/api/v1/webhooks/${hook.id}`, { as: 'admin' });
  });

  it('refuses private and loopback literals at registration when private addresses are not allowed, and plain http', async () => {
    // The API composed as in production (WEBHOOK_ALLOW_HTTP and WEBHOOK_ALLOW_PRIVATE off).
    const app = createApp({
      orm: env.service.db.orm,
      engine: env.service.engine,
      log: pino({ level: 'silent' }),
      maxBodyBytes: 1024 * 1024,
      dispatch: () => undefined,
      store: new GroupStore(env.service.db.orm, pino({ level: 'silent' })),
      links: createRecipientLinks(randomBytes(32), 'http://localhost'),
      webhooks: {
        secrets: { encrypt: (s) => s, decrypt: (s) => s },
        policy: { allowHttp: false, allowPrivate: false },
        dispatch: () => undefined,
      },
      domains: undefined as never,
      caps: undefined as never,
    });
    const server = http.createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      for (const url of [
        'https://127.0.0.1/hook',
        'https://10.1.2.3/hook',
        'https://169.254.169.254/latest/meta-data',
        'https://[::1]/hook',
        'https://[fd00:ec2::254]/hook',
        'https://[::ffff:192.168.0.1]/hook',
        'https://100.64.0.1/hook',
        'https://0x7f000001/hook',
        'https://localhost/hook',
        'http://hooks.example.com/hook',
      ]) {
        const res = await request(base, 'POST', '/api/v1/webhooks', { token: t.adminKey, body: { url } });
        assert.equal(res.status, 422, url);
        assert.equal(res.body.error.code, 'validation_error', url);
      }
      const ok = await request(base, 'POST', '/api/v1/webhooks', { token: t.adminKey, body: { url: 'https://hooks.example.com/hook' } });
      assert.equal(ok.status, 201);
      await t.call('DELETE', `/api/v1/webhooks/${ok.body.id}`, { as: 'admin' });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('documents every event in docs/webhooks.md with an example payload', async () => {
    const fs = await import('node:fs');
    const doc = fs.readFileSync(require.resolve('../../docs/webhooks.md'), 'utf8');
    for (const name of WEBHOOK_EVENTS) assert.ok(doc.includes(`"type": "${name}"`), `${name} has an example`);
  });
});
