import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { waitFor } from '../support/wait';
import { WebhookReceiver } from '../support/webhook-receiver';

describe('API: GET /emails and POST /emails/:id/cancel', function () {
  let env: TestEnv;
  let t: Tenant;
  const item = (extra: object = {}) => ({ from: `app@${t.domain}`, to: 'list@example.com', subject: 'List', text: 'hi', ...extra });

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    t = await newTenant(env);
  });

  it('pages newest first through a few hundred messages with no duplicates or gaps, even with concurrent inserts', async function () {
    this.timeout(120_000);
    const ids: string[] = [];
    for (let b = 0; b < 3; b++) {
      const res = await t.call('POST', '/api/v1/emails/batch', {
        body: Array.from({ length: 100 }, (_, i) => item({ subject: `p${b}-${i}` })),
        as: 'test',
      });
      ids.push(...res.body.data.map((d: { id: string }) => d.id));
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const res = await t.call('GET', `/api/v1/emails?limit=37${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(res.status, 200);
      assert.equal(res.body.object, 'list');
      seen.push(...res.body.data.map((d: { id: string }) => d.id));
      cursor = res.body.next_cursor;
      if (pages === 1) {
        // New mail arriving mid-walk lands before page one and must not shift later pages.
        await t.call('POST', '/api/v1/emails/batch', { body: Array.from({ length: 20 }, () => item()), as: 'test' });
      }
      pages++;
    } while (cursor);
    assert.equal(seen.length, 300);
    assert.equal(new Set(seen).size, 300, 'no duplicates');
    assert.deepEqual(seen, [...ids].reverse(), 'exactly the messages, newest first');
    assert.equal(pages, Math.ceil(300 / 37));
  });

  it('returns summaries with the documented fields and default limit 25', async () => {
    const res = await t.call('GET', '/api/v1/emails');
    assert.equal(res.body.data.length, 25);
    assert.ok(res.body.next_cursor);
    const s = res.body.data[0];
    assert.deepEqual(
      Object.keys(s).sort(),
      ['created_at', 'from', 'id', 'kind', 'last_event', 'mode', 'object', 'sent_at', 'source', 'subject', 'to'].sort(),
    );
  });

  it('filters by status, to, kind, mode, since and until', async () => {
    const other = await newTenant(env);
    const from = `app@${other.domain}`;
    const a = await other.call('POST', '/api/v1/emails', { body: { ...item(), from, to: 'Alice@Example.com', kind: 'receipt' } });
    const b = await other.call('POST', '/api/v1/emails', { body: { ...item(), from, to: 'bob@example.com' }, as: 'test' });
    const c = await other.call('POST', '/api/v1/emails', {
      body: { ...item(), from, to: 'carol@example.com', scheduled_at: new Date(Date.now() + 3600_000).toISOString() },
    });
    await other.call('POST', `/api/v1/emails/${c.body.id}/cancel`);
    const ids = async (q: string) => (await other.call('GET', `/api/v1/emails?${q}`)).body.data.map((d: { id: string }) => d.id);
    assert.deepEqual(await ids('to=alice@example.com'), [a.body.id]);
    assert.deepEqual(await ids('kind=receipt'), [a.body.id]);
    assert.deepEqual(await ids('mode=test'), [b.body.id]);
    assert.deepEqual(await ids('status=canceled'), [c.body.id]);
    assert.deepEqual(await ids(`since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`), []);
    assert.deepEqual(await ids(`until=${encodeURIComponent(new Date(Date.now() - 3600_000).toISOString())}`), []);
    assert.equal((await ids('since=2000-01-01T00:00:00Z')).length, 3);
  });

  it('rejects a bad cursor with invalid_cursor and bad parameters with validation_error', async () => {
    for (const cursor of [
      'garbage!',
      'dGhpcyBpcyBub3QgYSBjdXJzb3I',
      Buffer.from('v1|2020-01-01T00:00:00.000Z|nope').toString('base64url'),
    ]) {
      const res = await t.call('GET', `/api/v1/emails?cursor=${cursor}`);
      assert.equal(res.status, 422);
      assert.equal(res.body.error.code, 'invalid_cursor');
    }
    for (const q of ['limit=0', 'limit=101', 'limit=abc', 'status=weird', 'mode=x', 'since=yesterday', 'bogus=1']) {
      const res = await t.call('GET', `/api/v1/emails?${q}`);
      assert.equal(res.status, 422, q);
      assert.equal(res.body.error.code, 'validation_error', q);
    }
  });

  it('cancels a scheduled message; it is never sent', async () => {
    const res = await t.call('POST', '/api/v1/emails', {
      body: item({ to: 'later@example.com', scheduled_at: new Date(Date.now() + 2000).toISOString() }),
    });
    const cancel = await t.call('POST', `/api/v1/emails/${res.body.id}/cancel`);
    assert.equal(cancel.status, 200);
    assert.deepEqual(cancel.body, { id: res.body.id, object: 'email', status: 'canceled' });
    await new Promise((r) => setTimeout(r, 3500));
    const got = await t.call('GET', `/api/v1/emails/${res.body.id}`);
    assert.equal(got.body.last_event, 'canceled');
    assert.equal(env.sink.byMessageId(`<${res.body.id}@${t.domain}>`).length, 0);
    const again = await t.call('POST', `/api/v1/emails/${res.body.id}/cancel`);
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'not_cancelable');
  });

  it('a cancel is an event on the message and an email.canceled webhook, per recipient still due (issue 51)', async function () {
    this.timeout(60_000);
    const receiver = new WebhookReceiver();
    await receiver.start();
    try {
      const hook = await t.call('POST', '/api/v1/webhooks', {
        as: 'admin',
        body: { url: `${receiver.url}/canceled`, events: ['email.canceled'] },
      });
      assert.equal(hook.status, 201, JSON.stringify(hook.body));
      await t.call('POST', '/api/v1/suppressions', { as: 'admin', body: { email: 'listed-cancel@example.com' } });
      const res = await t.call('POST', '/api/v1/emails', {
        body: item({
          to: ['ann-cancel@example.com', 'listed-cancel@example.com'],
          cc: 'bob-cancel@example.com',
          scheduled_at: new Date(Date.now() + 60_000).toISOString(),
        }),
      });
      assert.deepEqual(res.body.suppressed, ['listed-cancel@example.com']);
      assert.equal((await t.call('POST', `/api/v1/emails/${res.body.id}/cancel`)).status, 200);
      const got = (await t.call('GET', `/api/v1/emails/${res.body.id}`)).body;
      const canceled = got.events.filter((e: { type: string }) => e.type === 'canceled');
      assert.deepEqual(canceled.map((e: { recipient: string }) => e.recipient).sort(), [
        'ann-cancel@example.com',
        'bob-cancel@example.com',
      ]);
      assert.ok(canceled.every((e: { at: string }) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(e.at)));
      const posts = await waitFor(
        async () => (receiver.at('/canceled').length >= 2 ? receiver.at('/canceled') : undefined),
        'two email.canceled',
      );
      assert.deepEqual(
        posts.map((p) => p.json.type),
        ['email.canceled', 'email.canceled'],
      );
      assert.deepEqual(posts.map((p) => p.json.data.recipient).sort(), ['ann-cancel@example.com', 'bob-cancel@example.com']);
      assert.ok(posts.every((p) => p.json.data.email_id === res.body.id));
      // A refused second cancel writes no event.
      assert.equal((await t.call('POST', `/api/v1/emails/${res.body.id}/cancel`)).status, 409);
      const after = (await t.call('GET', `/api/v1/emails/${res.body.id}`)).body;
      assert.equal(after.events.filter((e: { type: string }) => e.type === 'canceled').length, 2);
    } finally {
      await receiver.stop();
    }
  });

  it('sends a scheduled message when its time comes', async () => {
    const res = await t.call('POST', '/api/v1/emails', {
      body: item({ to: 'timer@example.com', scheduled_at: new Date(Date.now() + 1500).toISOString() }),
    });
    assert.equal((await t.call('GET', `/api/v1/emails/${res.body.id}`)).body.last_event, 'queued');
    await waitFor(async () => (await t.call('GET', `/api/v1/emails/${res.body.id}`)).body.last_event === 'sent', 'scheduled send');
    const got = await t.call('GET', `/api/v1/emails/${res.body.id}`);
    assert.ok(Date.parse(got.body.sent_at) >= Date.parse(got.body.scheduled_at));
  });

  it('refuses to cancel a sent message with 409 not_cancelable', async () => {
    const res = await t.call('POST', '/api/v1/emails', { body: item() });
    await waitFor(async () => (await t.call('GET', `/api/v1/emails/${res.body.id}`)).body.last_event === 'sent', 'sent');
    const cancel = await t.call('POST', `/api/v1/emails/${res.body.id}/cancel`);
    assert.equal(cancel.status, 409);
    assert.equal(cancel.body.error.code, 'not_cancelable');
  });

  it('cancel racing pick-up: exactly one wins, and the message is either canceled and unsent or sent', async function () {
    this.timeout(60_000);
    const outcomes = { canceled: 0, sent: 0 };
    for (let i = 0; i < 15; i++) {
      const due = new Date(Date.now() + 400).toISOString();
      const res = await t.call('POST', '/api/v1/emails', { body: item({ to: `race${i}@example.com`, scheduled_at: due }) });
      await new Promise((r) => setTimeout(r, 380 + (i % 5) * 10));
      const cancel = await t.call('POST', `/api/v1/emails/${res.body.id}/cancel`);
      const final = await waitFor(async () => {
        const s = (await t.call('GET', `/api/v1/emails/${res.body.id}`)).body.last_event;
        return ['canceled', 'sent'].includes(s) ? s : undefined;
      }, 'final state');
      const delivered = env.sink.byMessageId(`<${res.body.id}@${t.domain}>`).length;
      if (cancel.status === 200) {
        assert.equal(final, 'canceled');
        await new Promise((r) => setTimeout(r, 200));
        assert.equal(env.sink.byMessageId(`<${res.body.id}@${t.domain}>`).length, 0, 'canceled mail must not be sent');
        outcomes.canceled++;
      } else {
        assert.equal(cancel.status, 409);
        assert.equal(final, 'sent');
        assert.equal(delivered, 1);
        outcomes.sent++;
      }
    }
    assert.equal(outcomes.canceled + outcomes.sent, 15);
  });
});
