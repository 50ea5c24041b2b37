import { TemplateResolver } from '../../core/templates/resolver';
import assert from 'node:assert/strict';
import nodemailer, { type SendMailOptions } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import pino from 'pino';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { RawSmtp } from '../support/smtp-client';
import { sleep, waitFor } from '../support/wait';
import { createDomain, createKey } from '../../core/provisioning';
import { GroupStore } from '../../core/emails/group-store';
import { SmtpRelay } from '../../smtp/relay';
import { relayTls } from '../../smtp/tls';
import { tempDir } from '../support/pg';

type SendResult = SMTPTransport.SentMessageInfo;

describe('SMTP relay', function () {
  let env: TestEnv;
  let t: Tenant;
  let port: number;

  const transport = (token: string, opts: Partial<SMTPTransport.Options> = {}) =>
    nodemailer.createTransport({
      host: '127.0.0.1',
      port,
      secure: false,
      auth: { user: 'svc', pass: token },
      // The development certificate is self-signed.
      tls: { rejectUnauthorized: false },
      ...opts,
    });

  /** Sends with nodemailer over a fresh connection; answers the server's reply or the error it gave. */
  async function relay(message: SendMailOptions, token = t.sendKey, opts: Partial<SMTPTransport.Options> = {}): Promise<SendResult> {
    const tr = transport(token, opts);
    try {
      return await tr.sendMail(message);
    } finally {
      tr.close();
    }
  }

  async function refused(message: SendMailOptions, token = t.sendKey, opts: Partial<SMTPTransport.Options> = {}) {
    const err = (await relay(message, token, opts).then(
      () => assert.fail('the relay accepted a message it should refuse'),
      (e: unknown) => e,
    )) as { response?: string; responseCode?: number };
    assert.equal(typeof err.response, 'string', String(err));
    return err.response!;
  }

  const idOf = (info: SendResult) => {
    const m = /^250 2\.6\.0 Ok: (?:queued|already accepted) as ([0-9a-f-]{36})/.exec(info.response);
    assert.ok(m, `250 reply with the message id: ${info.response}`);
    return m[1];
  };
  const count = async () => (await t.call('GET', '/api/v1/emails?limit=100')).body.data.length as number;
  const message = (over: SendMailOptions = {}): SendMailOptions => ({
    from: `App <app@${t.domain}>`,
    to: 'user@example.com',
    subject: 'Over SMTP',
    text: 'plain body',
    html: '<p>html body</p>',
    ...over,
  });

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    t = await newTenant(env);
    port = env.service.relay!.port;
  });

  it('accepts a message over plain SMTP (development) and over STARTTLS, answering 250 with its id', async () => {
    const plain = await relay(message({ subject: 'plain' }), t.sendKey, { ignoreTLS: true });
    const overTls = await relay(message({ subject: 'starttls' }), t.sendKey, { requireTLS: true });
    for (const [info, subject] of [
      [plain, 'plain'],
      [overTls, 'starttls'],
    ] as const) {
      const id = idOf(info);
      const got = await t.call('GET', `/api/v1/emails/${id}`);
      assert.equal(got.status, 200);
      assert.equal(got.body.subject, subject);
      assert.equal(got.body.source, 'smtp');
      await waitFor(async () => env.sink.byMessageId(`<${id}@${t.domain}>`).length === 1, 'delivery to the sink');
    }
  });

  it('stores the same row as POST /emails for the same message, apart from source', async () => {
    const body = {
      from: `App <app@${t.domain}>`,
      to: ['user@example.com'],
      cc: ['Carol <carol@example.com>'],
      reply_to: `replies@${t.domain}`,
      subject: 'Same row',
      html: '<p>hi</p>',
      text: 'hi',
      headers: { 'X-Campaign': 'spring' },
      tags: [{ name: 'plan', value: 'pro' }],
      kind: 'transactional.receipt',
    };
    const api = await t.call('POST', '/api/v1/emails', { body });
    assert.equal(api.status, 200);
    const info = await relay({
      from: body.from,
      to: body.to,
      cc: body.cc,
      replyTo: body.reply_to,
      subject: body.subject,
      html: body.html,
      text: body.text,
      headers: { 'X-Campaign': 'spring', 'X-Svc-Tags': 'plan=pro', 'X-Svc-Kind': 'transactional.receipt' },
    });
    const [a, s] = await Promise.all([t.call('GET', `/api/v1/emails/${api.body.id}`), t.call('GET', `/api/v1/emails/${idOf(info)}`)]);
    const comparable = (e: any) => {
      const { id: _id, created_at: _c, sent_at: _s, last_event: _l, events, source: _src, ...rest } = e;
      return {
        ...rest,
        events: events.map((x: any) => ({ type: x.type, recipient: x.recipient })).filter((x: any) => x.type === 'queued'),
      };
    };
    assert.equal(a.body.source, 'api');
    assert.equal(s.body.source, 'smtp');
    assert.deepEqual(comparable(s.body), comparable(a.body));
    const list = await t.call('GET', '/api/v1/emails?limit=5');
    assert.equal(list.body.data.find((e: any) => e.id === idOf(info)).source, 'smtp');
  });

  it('takes bcc from the envelope: only envelope recipients receive', async () => {
    const info = await relay({
      ...message({ subject: 'bcc' }),
      to: 'Ann <ann@example.com>',
      cc: 'listed@example.com',
      envelope: { from: `bounce@${t.domain}`, to: ['ann@example.com', 'hidden@example.com'] },
    });
    const id = idOf(info);
    const got = await t.call('GET', `/api/v1/emails/${id}`);
    assert.deepEqual(got.body.to, ['Ann <ann@example.com>']);
    assert.deepEqual(got.body.cc, ['listed@example.com'], 'the Cc header is shown as written');
    assert.deepEqual(got.body.bcc, ['hidden@example.com']);
    assert.deepEqual(got.body.events.map((e: any) => e.recipient).sort(), ['ann@example.com', 'hidden@example.com']);
    const [delivered] = await waitFor(async () => {
      const r = env.sink.byMessageId(`<${id}@${t.domain}>`);
      return r.length ? r : null;
    }, 'delivery');
    assert.deepEqual(
      delivered.envelopeTo.sort(),
      ['ann@example.com', 'hidden@example.com'],
      'listed@ was only named, not an envelope recipient',
    );
    assert.ok(!delivered.raw.toString().includes('hidden@example.com'), 'a bcc recipient is never in the headers');
  });

  it('reads X-Svc-Kind, X-Svc-Tags and X-Svc-Idempotency-Key, and removes every X-Svc-* header', async () => {
    const headers = {
      'X-Svc-Kind': 'transactional.reset',
      'X-Svc-Tags': 'plan=pro; region=eu=west',
      'X-Svc-Idempotency-Key': `reset-${Date.now()}`,
      'X-Svc-Other': '1',
      'X-Kept': 'yes',
    };
    const first = idOf(await relay(message({ subject: 'svc headers', headers })));
    const again = await relay(message({ subject: 'svc headers', headers }));
    assert.equal(idOf(again), first, 'the same X-Svc-Idempotency-Key is one message');
    assert.match(again.response, /already accepted/);
    const got = await t.call('GET', `/api/v1/emails/${first}`);
    assert.equal(got.body.kind, 'transactional.reset');
    assert.deepEqual(got.body.tags, [
      { name: 'plan', value: 'pro' },
      { name: 'region', value: 'eu=west' },
    ]);
    assert.deepEqual(got.body.headers, { 'X-Kept': 'yes' });
    const [delivered] = await waitFor(async () => {
      const r = env.sink.byMessageId(`<${first}@${t.domain}>`);
      return r.length ? r : null;
    }, 'delivery');
    assert.ok(!/^x-svc-/im.test(delivered.raw.toString()), 'no X-Svc-* header leaves the service');
    assert.equal(delivered.parsed.headers.get('x-kept'), 'yes');
  });

  it('replaces reserved headers and drops List-Unsubscribe', async () => {
    const id = idOf(
      await relay(
        message({
          subject: 'reserved',
          messageId: `<own-${Date.now()}@client.test>`,
          headers: {
            'List-Unsubscribe': '<https://evil.test/u>',
            'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
            Received: 'from x by y',
          },
        }),
      ),
    );
    const got = await t.call('GET', `/api/v1/emails/${id}`);
    assert.deepEqual(got.body.headers, {});
    const [delivered] = await waitFor(async () => {
      const r = env.sink.byMessageId(`<${id}@${t.domain}>`);
      return r.length ? r : null;
    }, 'delivery with the service Message-ID');
    assert.ok(!/list-unsubscribe/i.test(delivered.raw.toString()));
    assert.ok(!delivered.raw.toString().includes('@client.test'), "the client's Message-ID is replaced by the service's");
  });

  it('carries attachments', async () => {
    const pdf = Buffer.from('%PDF-1.4 not really');
    const id = idOf(
      await relay(
        message({
          subject: 'attachment',
          attachments: [
            { filename: 'invoice.pdf', content: pdf, contentType: 'application/pdf' },
            { content: 'no name', contentType: 'text/csv' },
          ],
        }),
      ),
    );
    const got = await t.call('GET', `/api/v1/emails/${id}`);
    assert.deepEqual(got.body.attachments, [
      { filename: 'invoice.pdf', content_type: 'application/pdf', size: pdf.length },
      { filename: 'attachment-2.csv', content_type: 'text/csv', size: 7 }, // nodemailer names it
    ]);
    const [delivered] = await waitFor(async () => {
      const r = env.sink.byMessageId(`<${id}@${t.domain}>`);
      return r.length ? r : null;
    }, 'delivery');
    assert.deepEqual(delivered.parsed.attachments[0].content, pdf);
  });

  it('sends a message resent with the same Message-ID once, answering 250 both times', async () => {
    const messageId = `<resend-${Date.now()}@client.test>`;
    const before = await count();
    const first = idOf(await relay(message({ subject: 'resend', messageId })));
    const second = await relay(message({ subject: 'resend', messageId }));
    assert.equal(idOf(second), first);
    assert.equal(await count(), before + 1);
    // Another key's Message-ID space is its own: smtp:<key_id>:<Message-ID>.
    const other = await createKey(env.service.db.orm, t.orgId, { name: 'other', permission: 'send', mode: 'live', rateLimit: 100 });
    assert.notEqual(idOf(await relay(message({ subject: 'resend', messageId }), other.token)), first);
    await waitFor(async () => env.sink.byMessageId(`<${first}@${t.domain}>`).length === 1, 'one delivery');
    await sleep(1000);
    assert.equal(env.sink.byMessageId(`<${first}@${t.domain}>`).length, 1, 'and no second one');
  });

  it('takes the same Message-ID to other recipients as the next part of a split delivery, itself idempotent', async () => {
    const messageId = `<split-${Date.now()}@client.test>`;
    const to = Array.from({ length: 3 }, (_, i) => `member${i}@example.com`);
    const part = (rcpt: string[]) => message({ subject: 'split', to, messageId, envelope: { from: `app@${t.domain}`, to: rcpt } });
    const first = idOf(await relay(part([to[0], to[1]])));
    const second = idOf(await relay(part([to[2]])));
    assert.notEqual(second, first, 'a part for other recipients is a message of its own');
    assert.equal(idOf(await relay(part([to[2]]))), second, 'a retry of that part is a replay');
    assert.equal(idOf(await relay(part([to[1], to[0]]))), first, 'and so is a retry of the first, in any order');
    const got = await t.call('GET', `/api/v1/emails/${second}`);
    assert.deepEqual(
      got.body.events.filter((e: any) => e.type === 'queued').map((e: any) => e.recipient),
      [to[2]],
    );
    await waitFor(async () => env.sink.byMessageId(`<${second}@${t.domain}>`).length === 1, 'the second part delivered');
  });

  it('simulates with a test key: stored as test mail, nothing delivered', async () => {
    const id = idOf(await relay(message({ subject: 'test mode' }), t.testKey));
    const got = await waitFor(async () => {
      const r = await t.call('GET', `/api/v1/emails/${id}`, { as: 'test' });
      return r.body.last_event === 'delivered' ? r : null;
    }, 'simulated delivery');
    assert.equal(got.body.mode, 'test');
    assert.equal(env.sink.byMessageId(`<${id}@${t.domain}>`).length, 0);
  });

  describe('reply codes', () => {
    it('530 5.7.0 for MAIL FROM without AUTH, 535 5.7.8 for a bad key', async () => {
      const c = await RawSmtp.connect(port);
      await c.send('EHLO client.test');
      assert.match(await c.send(`MAIL FROM:<app@${t.domain}>`), /^530 5\.7\.0 authentication required: AUTH with an API key/);
      assert.match(await c.authPlain('svc_live_notarealkeynotarealkey0000'), /^535 5\.7\.8 invalid_api_key/);
      assert.match(await c.authPlain('not even a token'), /^535 5\.7\.8 /);
      c.close();
      assert.match(await refused(message(), 'svc_live_notarealkeynotarealkey0000'), /^535 5\.7\.8 /);
    });

    it('550 5.7.1 for a sender domain that is not verified, not allowed for the key, or not the MAIL FROM domain', async () => {
      const before = await count();
      assert.match(await refused(message({ from: 'app@unverified.example.test' })), /^550 5\.7\.1 domain_not_verified/);
      const orm = env.service.db.orm;
      const second = await createDomain(orm, t.orgId, `second-${Date.now()}.example.test`, { verified: true });
      const restricted = await createKey(orm, t.orgId, {
        name: 'restricted',
        permission: 'send',
        mode: 'live',
        rateLimit: 100,
        domainIds: [second.id],
      });
      assert.match(await refused(message(), restricted.token), /^550 5\.7\.1 domain_not_verified/);
      assert.ok(idOf(await relay(message({ from: `app@${second.name}` }), restricted.token)), 'its own domain passes');
      const other = await newTenant(env);
      assert.match(
        await refused({ ...message(), envelope: { from: `app@${other.domain}`, to: ['user@example.com'] } }, other.sendKey),
        /^550 5\.7\.1 the From header's domain must be the MAIL FROM domain/,
      );
      assert.equal(await count(), before + 1, "nothing stored but the restricted key's own message");
    });

    it('550 5.6.0 with the API error code for what POST /emails refuses', async () => {
      const before = await count();
      assert.match(await refused(message({ subject: undefined })), /^550 5\.6\.0 validation_error: /);
      assert.match(await refused(message({ headers: { 'X-Svc-Tags': 'no equals sign' } })), /^550 5\.6\.0 validation_error: X-Svc-Tags/);
      assert.match(
        await refused(message({ headers: { 'X-Svc-Kind': 'bulk.digest' }, to: ['a@example.com', 'b@example.com'] })),
        /^550 5\.6\.0 validation_error: kind bulk\.digest is bulk mail/,
      );
      assert.match(await refused(message({ headers: { 'X-Svc-Kind': 'bulk.digest' } })), /^550 5\.6\.0 stream_mismatch: /);
      const raw = (from: string) => ({
        envelope: { from: `app@${t.domain}`, to: ['user@example.com'] },
        raw: `From: ${from}\r\nTo: user@example.com\r\nSubject: raw\r\n\r\nbody\r\n`,
      });
      assert.match(await refused(raw(`a@${t.domain}, b@${t.domain}`)), /^550 5\.6\.0 validation_error: the From header/);
      assert.match(await refused(raw(`Group: a@${t.domain};`)), /^550 5\.6\.0 validation_error: /);
      assert.equal(await count(), before, 'nothing stored');
    });

    it('554 5.6.0 for data that is not a message; 452 4.5.3 past 50 recipients', async () => {
      const c = await RawSmtp.connect(port);
      await c.send('EHLO client.test');
      assert.match(await c.authPlain(t.sendKey), /^235 /);
      assert.match(await c.send(`MAIL FROM:<app@${t.domain}>`), /^250 /);
      for (let i = 1; i <= 50; i++) assert.match(await c.send(`RCPT TO:<r${i}@example.com>`), /^250 /);
      assert.match(await c.send('RCPT TO:<r51@example.com>'), /^452 4\.5\.3 /);
      assert.match(await c.send('DATA'), /^354 /);
      assert.match(await c.send('\x00\x01 this is not a message\r\n.\r\n'), /^554 5\.6\.0 /);
      assert.match(await c.send(`MAIL FROM:<app@${t.domain}>`), /^250 /);
      assert.match(await c.send('RCPT TO:<user@[127.0.0.1]>'), /^553 5\.1\.3 not an address the service sends to/);
      c.close();
    });

    it('450 4.7.1 when the key is over its rate (one request per message)', async () => {
      const slow = await createKey(env.service.db.orm, t.orgId, { name: 'slow', permission: 'send', mode: 'live', rateLimit: 1 });
      const tr = nodemailer.createTransport({
        host: '127.0.0.1',
        port,
        auth: { user: 'svc', pass: slow.token },
        tls: { rejectUnauthorized: false },
        pool: true,
        maxConnections: 1,
      });
      try {
        const results = await Promise.allSettled([1, 2, 3].map((i) => tr.sendMail(message({ subject: `rate ${i}` }))));
        const codes = results.map((r) =>
          r.status === 'fulfilled' ? r.value.response.slice(0, 9) : (r.reason as { response: string }).response.slice(0, 9),
        );
        assert.ok(codes.includes('250 2.6.0'), codes.join());
        assert.ok(codes.includes('450 4.7.1'), codes.join());
      } finally {
        tr.close();
      }
    });
  });

  describe('a strict relay (production settings: STARTTLS before AUTH, implicit TLS, small SIZE, one connection per key)', () => {
    let strict: SmtpRelay;
    let failing = false;

    before(async () => {
      const orm = env.service.db.orm;
      const log = pino({ level: 'silent' });
      const dataDir = tempDir('relay-tls');
      const tls = await relayTls({ certFile: null, keyFile: null, dataDir });
      // Generated once into the data folder, then reused: a client that pinned it keeps working.
      assert.ok(tls.selfSigned);
      assert.deepEqual((await relayTls({ certFile: null, keyFile: null, dataDir })).cert, tls.cert);
      const store = new GroupStore(orm, log);
      const realStore = store.store.bind(store);
      // Our own fault, on demand: the store statement fails.
      store.store = (req) => (failing ? Promise.reject(new Error('database went away')) : realStore(req));
      strict = new SmtpRelay(
        { orm, store, templates: new TemplateResolver(orm), dispatch: () => undefined, log },
        {
          port: 0,
          tlsPort: 0,
          host: '127.0.0.1',
          tls,
          allowInsecureAuth: false,
          maxConnectionsPerKey: 1,
          idleSeconds: 1,
          maxMessageBytes: 64 * 1024,
        },
      );
      await strict.start();
    });
    after(() => strict.stop());

    it('538 5.7.11 for AUTH before STARTTLS; AUTH after STARTTLS and on the implicit-TLS port works', async () => {
      const c = await RawSmtp.connect(strict.port);
      const ehlo = await c.send('EHLO client.test');
      assert.match(ehlo, /STARTTLS/);
      assert.match(ehlo, new RegExp(`SIZE ${64 * 1024}`));
      assert.match(await c.authPlain(t.sendKey), /^538 5\.7\.11 /);
      await c.startTls();
      assert.match(await c.authPlain(t.sendKey), /^235 /);
      c.close();
      const implicit = await RawSmtp.connect(strict.tlsPort!, { implicitTls: true });
      await implicit.send('EHLO client.test');
      assert.match(await implicit.authPlain(t.sendKey), /^235 /);
      implicit.close();
    });

    it('552 5.3.4 for a message over SIZE', async () => {
      const err = await refused(message({ text: 'x'.repeat(80 * 1024) }), t.sendKey, { port: strict.port, requireTLS: true });
      assert.match(err, /^552 5\.3\.4 /);
      // Without SIZE= at MAIL FROM the limit is found while the data arrives.
      const c = await RawSmtp.connect(strict.tlsPort!, { implicitTls: true });
      await c.send('EHLO client.test');
      assert.match(await c.authPlain(t.sendKey), /^235 /);
      assert.match(await c.send(`MAIL FROM:<app@${t.domain}>`), /^250 /);
      assert.match(await c.send('RCPT TO:<user@example.com>'), /^250 /);
      assert.match(await c.send('DATA'), /^354 /);
      const big = `From: app@${t.domain}\r\nTo: user@example.com\r\nSubject: big\r\n\r\n${'x'.repeat(76) + '\r\n'}`.repeat(1200);
      assert.match(await c.send(`${big}.\r\n`), /^552 5\.3\.4 /);
      c.close();
    });

    it('454 4.7.0 for a connection beyond the per-key limit; closes idle connections with 421', async () => {
      const key = await createKey(env.service.db.orm, t.orgId, {
        name: 'one-connection',
        permission: 'send',
        mode: 'live',
        rateLimit: 100,
      });
      const a = await RawSmtp.connect(strict.tlsPort!, { implicitTls: true });
      await a.send('EHLO client.test');
      assert.match(await a.authPlain(key.token), /^235 /);
      const b = await RawSmtp.connect(strict.tlsPort!, { implicitTls: true });
      await b.send('EHLO client.test');
      assert.match(await b.authPlain(key.token), /^454 4\.7\.0 /);
      b.close();
      await sleep(1500); // idle past SMTP_RELAY_IDLE_SECONDS (1 here): the server has said goodbye
      assert.match(await a.send('NOOP').catch((e: Error) => e.message), /421 /);
      a.close();
      // The closed connection gave its slot back.
      const c = await RawSmtp.connect(strict.tlsPort!, { implicitTls: true });
      await c.send('EHLO client.test');
      assert.match(
        await waitFor(async () => {
          const r = await c.authPlain(key.token);
          return r.startsWith('235') ? r : null;
        }, 'a free slot'),
        /^235 /,
      );
      c.close();
    });

    it('451 4.3.0 for our own fault, with an error id to grep', async () => {
      failing = true;
      try {
        const err = await refused(message(), t.sendKey, { port: strict.port, requireTLS: true });
        assert.match(err, /^451 4\.3\.0 internal_error: temporary fault; retry later \(error id [0-9a-f-]{36}\)/);
      } finally {
        failing = false;
      }
    });
  });
});
