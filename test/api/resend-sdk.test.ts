import assert from 'node:assert/strict';
import { Resend } from 'resend';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';

// The `resend` Node SDK, unchanged, pointed at this service the way its users would: the SDK reads
// RESEND_BASE_URL when a client is constructed. The calls it shares with this API (send, batch,
// get, list, cancel) must keep working; its answers are `{ data, error, headers }`.
describe('API: the resend Node SDK', function () {
  let env: TestEnv;
  let t: Tenant;
  let resend: Resend;
  let savedBaseUrl: string | undefined;
  const message = (extra: object = {}) => ({
    from: `App <app@${t.domain}>`,
    to: 'sdk@example.com',
    subject: 'From the SDK',
    html: '<p>hi</p>',
    ...extra,
  });
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    t = await newTenant(env);
    savedBaseUrl = process.env.RESEND_BASE_URL;
    process.env.RESEND_BASE_URL = `${env.url}/api/v1`;
    resend = new Resend(t.sendKey);
  });

  after(() => {
    if (savedBaseUrl === undefined) delete process.env.RESEND_BASE_URL;
    else process.env.RESEND_BASE_URL = savedBaseUrl;
  });

  it('sends with emails.send and reads the message back with emails.get', async () => {
    const sent = await resend.emails.send({
      ...message({ subject: 'SDK send' }),
      cc: ['copy@example.com'],
      replyTo: 'reply@example.com',
      text: 'hi',
      tags: [{ name: 'source', value: 'sdk' }],
    });
    assert.equal(sent.error, null, JSON.stringify(sent.error));
    assert.match(sent.data!.id, UUID);

    const got = await resend.emails.get(sent.data!.id);
    assert.equal(got.error, null, JSON.stringify(got.error));
    const email = got.data!;
    assert.equal(email.object, 'email');
    assert.equal(email.id, sent.data!.id);
    assert.equal(email.from, `App <app@${t.domain}>`);
    assert.deepEqual(email.to, ['sdk@example.com']);
    assert.deepEqual(email.cc, ['copy@example.com']);
    // The spec's reply_to is one address, a string (Resend's own API answers an array).
    assert.equal(email.reply_to as unknown, 'reply@example.com');
    assert.equal(email.subject, 'SDK send');
    assert.equal(email.html, '<p>hi</p>');
    assert.equal(email.text, 'hi');
    assert.deepEqual(email.tags, [{ name: 'source', value: 'sdk' }]);
    assert.ok(!Number.isNaN(Date.parse(email.created_at)));
  });

  it('passes the idempotencyKey option as Idempotency-Key: a retry answers the first id, replayed', async () => {
    const idempotencyKey = `sdk-${Date.now()}`;
    const first = await resend.emails.send(message({ subject: 'once' }), { idempotencyKey });
    assert.equal(first.error, null, JSON.stringify(first.error));
    const again = await resend.emails.send(message({ subject: 'once' }), { idempotencyKey });
    assert.equal(again.error, null, JSON.stringify(again.error));
    assert.equal(again.data!.id, first.data!.id);
    assert.equal(again.headers!['idempotent-replayed'], 'true');
    const other = await resend.emails.send(message({ subject: 'once' }));
    assert.notEqual(other.data!.id, first.data!.id, 'without the option, a new message');
  });

  it('sends a batch with batch.send: one id per item, in order', async () => {
    const res = await resend.batch.send([
      message({ subject: 'batch one' }),
      message({ subject: 'batch two', to: ['a@example.com', 'b@example.com'] }),
    ]);
    assert.equal(res.error, null, JSON.stringify(res.error));
    const ids = res.data!.data.map((d) => d.id);
    assert.equal(ids.length, 2);
    for (const id of ids) assert.match(id, UUID);
    assert.equal((await resend.emails.get(ids[0])).data!.subject, 'batch one');
    assert.deepEqual((await resend.emails.get(ids[1])).data!.to, ['a@example.com', 'b@example.com']);
  });

  it('lists with emails.list, newest first, in the list envelope', async () => {
    const sent = await resend.emails.send(message({ subject: 'newest' }));
    const res = await resend.emails.list();
    assert.equal(res.error, null, JSON.stringify(res.error));
    const list = res.data! as typeof res.data & { next_cursor?: string | null };
    assert.equal(list.object, 'list');
    assert.ok(Array.isArray(list.data));
    assert.equal(list.data[0].id, sent.data!.id);
    assert.equal(list.data[0].subject, 'newest');
    assert.equal(list.data.length, 6, 'every message of this file so far (a replay makes none)');
    assert.equal(list.next_cursor, undefined, 'next_cursor only when more pages exist');

    const page = await resend.emails.list({ limit: 2 });
    assert.equal(page.error, null, JSON.stringify(page.error));
    assert.deepEqual(
      page.data!.data.map((e) => e.id),
      list.data.slice(0, 2).map((e) => e.id),
    );
    assert.equal(typeof (page.data as typeof page.data & { next_cursor?: string }).next_cursor, 'string');
  });

  it('cancels a scheduled message with emails.cancel', async () => {
    const scheduledAt = new Date(Date.now() + 3600_000).toISOString();
    const sent = await resend.emails.send(message({ subject: 'later', scheduledAt }));
    assert.equal(sent.error, null, JSON.stringify(sent.error));
    const canceled = await resend.emails.cancel(sent.data!.id);
    assert.equal(canceled.error, null, JSON.stringify(canceled.error));
    assert.equal(canceled.data!.id, sent.data!.id);
    const got = await resend.emails.get(sent.data!.id);
    assert.equal(got.data!.last_event, 'canceled');
    assert.equal(Date.parse(got.data!.scheduled_at!), Date.parse(scheduledAt));

    // A second cancel is refused: the SDK hands our error envelope back as its `error`.
    const again = await resend.emails.cancel(sent.data!.id);
    assert.equal(again.data, null);
    assert.equal((again.error as unknown as { error: { code: string } }).error.code, 'not_cancelable');
  });

  it('returns a refusal as the SDK error, with our code and message, and sends nothing', async () => {
    const count = async () => (await resend.emails.list({ limit: 100 })).data!.data.length;
    const before = await count();
    const res = await resend.emails.send(message({ from: 'App <app@not-ours.example>' }));
    assert.equal(res.data, null);
    // The SDK returns the parsed error body as `error`: our envelope, `{ error: { code, message } }`.
    const body = res.error as unknown as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'domain_not_verified');
    assert.equal(typeof body.error.message, 'string');
    assert.ok(body.error.message.length > 0);
    assert.equal(await count(), before, 'a refused send stores nothing');

    const batch = await resend.batch.send([message(), message({ from: 'app@not-ours.example' })]);
    assert.equal(batch.error, null, 'a batch answers 200 with the refusal inside its item');
    const items = batch.data!.data as unknown as Array<{ id?: string; error?: { code: string } }>;
    assert.match(items[0].id!, UUID);
    assert.equal(items[1].error!.code, 'domain_not_verified');
  });

  it('answers a key it does not know with invalid_api_key in the SDK error', async () => {
    const stranger = new Resend('svc_live_not-a-real-key');
    const res = await stranger.emails.get('00000000-0000-4000-8000-000000000000');
    assert.equal(res.data, null);
    assert.equal((res.error as unknown as { error: { code: string } }).error.code, 'invalid_api_key');
  });
});
