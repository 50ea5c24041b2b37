import assert from 'node:assert/strict';
import type { AddressObject } from 'mailparser';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { request } from '../support/http';
import { inboxApp } from '../support/inbox-app';
import { waitFor } from '../support/wait';
import { beyondLoopback } from '../../server/service';
import { Email } from '../../db/entities';

const mailboxes = (a: AddressObject | AddressObject[] | undefined) => (Array.isArray(a) ? a : a ? [a] : []).flatMap((x) => x.value);

describe('API hardening: one mailbox per address, media types, container attachments, the inbox beyond loopback', function () {
  this.timeout(60_000);
  let env: TestEnv;
  let t: Tenant;
  const stored = async (subject: string) => env.service.db.orm.em.fork().count(Email, { organizationId: t.orgId, subject });

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
  });

  it('refuses a From, Reply-To, To or Cc that is not exactly one mailbox, and stores nothing', async () => {
    const subject = `spoof-${Date.now()}`;
    const base = { from: `app@${t.domain}`, to: 'victim@example.com', subject, text: 't' };
    const spoofs: Record<string, string>[] = [
      { from: `ceo@bank.example, Evil <probe@${t.domain}>` },
      { from: `ceo@bank.example <probe@${t.domain}>` },
      { from: `Team: ceo@bank.example, probe@${t.domain};` },
      { from: `probe@${t.domain} (ceo@bank.example)` },
      { from: `Evil <ceo@bank.example> <probe@${t.domain}>` },
      { reply_to: 'a@example.com, b@example.com' },
      { to: 'victim@example.com, other@example.com' },
      { cc: 'Victim <victim@example.com>, other@example.com' },
    ];
    for (const spoof of spoofs) {
      const res = await t.call('POST', '/api/v1/emails', { body: { ...base, ...spoof } });
      assert.equal(res.status, 422, JSON.stringify(spoof));
      assert.equal(res.body.error.code, 'validation_error');
      assert.equal(res.body.error.details[0].field, Object.keys(spoof)[0]);
    }
    assert.equal(await stored(subject), 0);
  });

  it('sends exactly the checked mailbox in From, and To/Cc headers name only envelope recipients', async () => {
    const subject = `one-mailbox-${Date.now()}`;
    const res = await t.call('POST', '/api/v1/emails', {
      body: {
        from: `"Lee, Ann (Billing)" <billing@${t.domain}>`,
        reply_to: '"Support, Team" <help@example.com>',
        to: ['"Doe, John" <john@example.com>'],
        cc: ['Émile Zola <emile@example.com>'],
        subject,
        text: 'hello',
      },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const got = await waitFor(async () => env.sink.received.find((m) => m.parsed.subject === subject), 'delivery');
    assert.deepEqual(mailboxes(got.parsed.from), [{ address: `billing@${t.domain}`, name: 'Lee, Ann (Billing)' }]);
    assert.deepEqual(mailboxes(got.parsed.replyTo), [{ address: 'help@example.com', name: 'Support, Team' }]);
    const named = [...mailboxes(got.parsed.to), ...mailboxes(got.parsed.cc)].map((m) => m.address);
    assert.deepEqual(named, ['john@example.com', 'emile@example.com']);
    assert.deepEqual([...got.envelopeTo].sort(), [...named].sort());
    assert.equal(got.envelopeFrom, `billing@${t.domain}`);
  });

  it('names no suppressed recipient in To or Cc: headers name only envelope recipients', async () => {
    const subject = `suppressed-header-${Date.now()}`;
    const blocked = `blocked-${Date.now()}@example.com`;
    await env.service.db.orm.em
      .fork()
      .getConnection()
      .execute(
        `insert into suppressions (id, organization_id, email, reason, created_at) values (gen_random_uuid(), ?, ?, 'manual', now())`,
        [t.orgId, blocked],
      );
    const res = await t.call('POST', '/api/v1/emails', {
      body: { from: `app@${t.domain}`, to: ['kept@example.com'], cc: [`Blocked <${blocked.toUpperCase()}>`], subject, text: 't' },
    });
    assert.deepEqual(res.body.suppressed, [blocked.toUpperCase()]);
    const got = await waitFor(async () => env.sink.received.find((m) => m.parsed.subject === subject), 'delivery');
    assert.deepEqual(got.envelopeTo, ['kept@example.com']);
    assert.deepEqual(
      [...mailboxes(got.parsed.to), ...mailboxes(got.parsed.cc)].map((m) => m.address),
      ['kept@example.com'],
    );
    assert.ok(!got.raw.toString('utf8').toLowerCase().includes(blocked), 'the suppressed address is nowhere in the message');
  });

  it('reads media types case-insensitively and refuses a charset other than UTF-8', async () => {
    const body = JSON.stringify({ from: `app@${t.domain}`, to: 'x@example.com', subject: 'media', text: 't' });
    for (const type of ['APPLICATION/JSON', 'application/json; charset=UTF-8', 'Application/Json;Charset="utf-8"']) {
      const res = await t.call('POST', '/api/v1/emails', { raw: body, contentType: type, as: 'test' });
      assert.equal(res.status, 200, `${type}: ${JSON.stringify(res.body)}`);
    }
    for (const type of ['application/json; charset=latin1', 'text/json', 'application/jsonx']) {
      const res = await t.call('POST', '/api/v1/emails', { raw: body, contentType: type, as: 'test' });
      assert.equal(res.status, 415, type);
      assert.equal(res.body.error.code, 'unsupported_media_type');
    }
  });

  it('refuses multipart/* and message/* attachment types (they cannot be leaf parts), and stores nothing', async () => {
    const subject = `containers-${Date.now()}`;
    for (const content_type of ['message/rfc822', 'MULTIPART/mixed; boundary="x"', 'message/partial']) {
      const res = await t.call('POST', '/api/v1/emails', {
        body: {
          from: `app@${t.domain}`,
          to: 'x@example.com',
          subject,
          text: 't',
          attachments: [{ filename: 'a.eml', content: 'eA==', content_type }],
        },
      });
      assert.equal(res.status, 422, content_type);
      assert.equal(res.body.error.details[0].field, 'attachments[0].content_type');
    }
    assert.equal(await stored(subject), 0);
    // The same bytes as an opaque file are fine.
    const ok = await t.call('POST', '/api/v1/emails', {
      body: {
        from: `app@${t.domain}`,
        to: 'x@example.com',
        subject,
        text: 't',
        attachments: [{ filename: 'a.eml', content: 'eA==', content_type: 'application/octet-stream' }],
      },
      as: 'test',
    });
    assert.equal(ok.status, 200);
  });

  describe('the development inbox', () => {
    it('is served beyond loopback only to a live ADMIN key (Bearer, or Basic for a browser)', async () => {
      const served = await inboxApp(env, { adminOnly: true });
      try {
        const open = await request(served.url, 'GET', '/inbox');
        assert.equal(open.status, 401);
        assert.match(open.headers.get('www-authenticate') ?? '', /^Basic realm=/);
        assert.equal((await request(served.url, 'GET', '/inbox/messages.json', { token: t.sendKey })).status, 403);
        assert.equal((await request(served.url, 'GET', '/inbox/messages.json', { token: t.adminKey })).status, 200);
        const basic = Buffer.from(`svc:${t.adminKey}`).toString('base64');
        assert.equal((await request(served.url, 'GET', '/inbox', { headers: { authorization: `Basic ${basic}` } })).status, 200);
        const wrong = Buffer.from('svc:svc_live_notakeynotakeynotakey12').toString('base64');
        assert.equal((await request(served.url, 'GET', '/inbox', { headers: { authorization: `Basic ${wrong}` } })).status, 401);
      } finally {
        await served.stop();
      }
    });

    it('is open on loopback, and the service decides by HOST', async () => {
      const served = await inboxApp(env, { adminOnly: false });
      try {
        assert.equal((await request(served.url, 'GET', '/inbox')).status, 200);
      } finally {
        await served.stop();
      }
      for (const host of ['127.0.0.1', '127.0.0.2', '::1', 'localhost']) assert.equal(beyondLoopback(host), false, host);
      for (const host of ['0.0.0.0', '::', '10.0.0.5', 'mail.example.com']) assert.equal(beyondLoopback(host), true, host);
    });
  });
});
