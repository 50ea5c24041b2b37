import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { waitFor } from '../support/wait';

describe('Delivery through the SendEmail workflow (embedded engine)', function () {
  let env: TestEnv;
  let t: Tenant;
  const item = (extra: object = {}) => ({
    from: `Shop <shop@${t.domain}>`,
    to: 'buyer@example.com',
    subject: 'Your order',
    html: '<p>Thanks</p>',
    text: 'Thanks',
    ...extra,
  });
  const settled = (id: string, status: string) =>
    waitFor(
      async () => {
        const got = await t.call('GET', `/api/v1/emails/${id}`);
        return got.body.last_event === status ? got.body : undefined;
      },
      `email ${id} to be ${status}`,
      30_000,
    );

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    t = await newTenant(env);
  });

  it('test mode follows the outcome table with no SMTP traffic', async () => {
    const cases: [string, string[], string][] = [
      ['bounce@example.com', ['queued', 'sent', 'bounced'], 'bounced'],
      ['complaint+x@anything.test', ['queued', 'sent', 'delivered', 'complained'], 'complained'],
      ['suppressionlist@example.com', ['queued', 'sent', 'rejected'], 'suppressed'],
      ['ooto@example.com', ['queued', 'sent', 'delivered'], 'delivered'],
      ['someone@example.com', ['queued', 'sent', 'delivered'], 'delivered'],
    ];
    const before = env.sink.dataAttempts;
    for (const [to, events, status] of cases) {
      const res = await t.call('POST', '/api/v1/emails', { body: item({ to }), as: 'test' });
      const body = await settled(res.body.id, status);
      assert.equal(body.mode, 'test');
      assert.deepEqual(
        body.events.map((e: { type: string }) => e.type),
        events,
        to,
      );
      if (to.startsWith('bounce')) assert.equal(body.events[2].bounce_type, 'hard');
    }
    assert.equal(env.sink.dataAttempts, before, 'test mode never talks SMTP');
    // Test bounces never reach the suppression list.
    const again = await t.call('POST', '/api/v1/emails', { body: item({ to: 'bounce@example.com' }), as: 'test' });
    assert.equal(again.body.suppressed, undefined);
  });

  it('live mail reaches the relay as one MIME message with the right headers and a stable Message-ID', async () => {
    const attachment = Buffer.from('col1,col2\n1,2\n');
    const res = await t.call('POST', '/api/v1/emails', {
      body: item({
        to: ['Buyer <buyer@example.com>'],
        cc: 'cc@example.com',
        bcc: ['hidden@example.com'],
        reply_to: 'help@example.com',
        headers: { 'X-Entity-Ref-ID': 'order-42' },
        attachments: [{ filename: 'order.csv', content: attachment.toString('base64'), content_type: 'text/csv' }],
      }),
    });
    const body = await settled(res.body.id, 'sent');
    const [msg] = env.sink.byMessageId(`<${res.body.id}@${t.domain}>`);
    assert.ok(msg, 'received by the sink');
    assert.equal(msg.envelopeFrom, `shop@${t.domain}`);
    assert.deepEqual(msg.envelopeTo.sort(), ['buyer@example.com', 'cc@example.com', 'hidden@example.com']);
    const p = msg.parsed;
    assert.equal(p.subject, 'Your order');
    assert.equal(p.from?.text, `"Shop" <shop@${t.domain}>`);
    assert.equal(p.headers.get('x-entity-ref-id'), 'order-42');
    assert.equal(p.headers.get('bcc'), undefined, 'Bcc never appears in the message');
    assert.match(String((p.replyTo as { text: string }).text), /help@example.com/);
    // The stored fragment, in its document on the wire (docs/delivery.md, "On the wire").
    assert.equal(p.html, '<html><body><p>Thanks</p></body></html>');
    assert.equal(p.text?.trim(), 'Thanks');
    assert.equal(p.attachments.length, 1);
    assert.equal(p.attachments[0].filename, 'order.csv');
    assert.deepEqual(p.attachments[0].content, attachment);
    const types = body.events
      .filter((e: { recipient: string }) => e.recipient === 'buyer@example.com')
      .map((e: { type: string }) => e.type);
    assert.deepEqual(types, ['queued', 'sent']);
    assert.ok(body.sent_at);
  });

  it('a 5xx refusal is a hard bounce for that recipient only, not retried, and suppresses the address', async () => {
    env.sink.rules.set('nobody@example.com', { rcpt: 'reject', code: 550, message: '5.1.1 no such user' });
    const res = await t.call('POST', '/api/v1/emails', { body: item({ to: ['nobody@example.com', 'somebody@example.com'] }) });
    const body = await settled(res.body.id, 'sent');
    const bounce = body.events.find((e: { type: string }) => e.type === 'bounced');
    assert.equal(bounce.recipient, 'nobody@example.com');
    assert.equal(bounce.bounce_type, 'hard');
    assert.match(bounce.detail, /no such user/);
    const [msg] = env.sink.byMessageId(`<${res.body.id}@${t.domain}>`);
    assert.deepEqual(msg.envelopeTo, ['somebody@example.com']);
    const next = await t.call('POST', '/api/v1/emails', { body: item({ to: 'nobody@example.com' }) });
    assert.deepEqual(next.body.suppressed, ['nobody@example.com']);
  });

  it('a 4xx refusal is retried with backoff and then delivered once', async function () {
    this.timeout(30_000);
    env.sink.rules.set('busy@example.com', { rcpt: 'tempfail', times: 2 });
    const res = await t.call('POST', '/api/v1/emails', { body: item({ to: 'busy@example.com' }) });
    const body = await settled(res.body.id, 'sent');
    assert.equal(env.sink.byMessageId(`<${res.body.id}@${t.domain}>`).length, 1);
    assert.deepEqual(
      body.events.map((e: { type: string }) => e.type),
      ['queued', 'sent'],
    );
  });

  it('transient failures that never clear end as failed after 4 attempts, with the reason', async function () {
    this.timeout(40_000);
    env.sink.rules.set('forever-busy@example.com', { rcpt: 'tempfail', times: 100 });
    const res = await t.call('POST', '/api/v1/emails', { body: item({ to: 'forever-busy@example.com' }) });
    const body = await settled(res.body.id, 'failed');
    const failed = body.events.find((e: { type: string }) => e.type === 'failed');
    assert.match(failed.detail, /temporarily refused|mailbox busy/);
    assert.equal(env.sink.byMessageId(`<${res.body.id}@${t.domain}>`).length, 0);
  });
});
