import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { WebhookReceiver } from '../support/webhook-receiver';
import { waitFor } from '../support/wait';
import { RawSmtp } from '../support/smtp-client';
import { buildArf, buildDsn, buildPlain, deliverRaw, originalHeaders } from '../support/returns';
import { verpTokenOf } from '../../core/bounces/verp';

/**
 * Issue 14 end to end over real SMTP: live mail leaves through the sink with its VERP return
 * path, reports come back to the inbound listener built as mail servers build them, and the
 * message, its events, the suppression list, the contact and the webhooks show the outcome.
 */
describe('SMTP inbound: bounces and complaints', function () {
  this.timeout(90_000);
  let env: TestEnv;
  let t: Tenant;
  let domain: { id: string; name: string; return_path: string };
  let receiver: WebhookReceiver;
  let hook: { id: string; secret: string };
  let n = 0;

  before(async () => {
    env = await sharedService();
    t = await newTenant(env);
    // A domain made through the API has its DNS identity (DKIM key, return-path host); verified here by hand.
    const created = await t.call('POST', '/api/v1/domains', { as: 'admin', body: { name: `returns-${Date.now()}.example.test` } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    domain = created.body;
    await env.service.db.orm.em.fork().getConnection().execute(`update domains set status = 'verified' where id = ?`, [domain.id]);
    receiver = new WebhookReceiver();
    await receiver.start();
    const res = await t.call('POST', '/api/v1/webhooks', {
      as: 'admin',
      body: { url: `${receiver.url}/returns`, events: ['email.bounced', 'email.complained', 'email.delivery_delayed'] },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    hook = res.body;
  });
  after(async () => receiver.stop());

  const port = () => env.service.inbound!.port;
  const sql = () => env.service.db.orm.em.fork().getConnection();
  const get = async (id: string) => (await t.call('GET', `/api/v1/emails/${id}`)).body;

  /** A live message to a fresh address, delivered to the sink; its id, address and return path. */
  async function sendLive(label: string, extra: Record<string, unknown> = {}) {
    const to = `${label}-${++n}-${Date.now()}@example.org`;
    const res = await t.call('POST', '/api/v1/emails', {
      body: { from: `Shop <shop@${domain.name}>`, to, subject: 'Your receipt', text: 'thanks', ...extra },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const msg = await waitFor(async () => env.sink.received.find((m) => m.envelopeTo.includes(to)), 'the message at the sink');
    // Settled (the delivery recorded `sent`) before anything comes back, as with real mail.
    const email = await waitFor(async () => {
      const e = await get(res.body.id);
      return e.last_event === 'sent' ? e : undefined;
    }, 'status sent');
    return { id: res.body.id as string, to, returnPath: msg.envelopeFrom, messageId: msg.parsed.messageId as string, email };
  }

  const original = (s: { returnPath: string; to: string; messageId: string }) =>
    originalHeaders({ returnPath: s.returnPath, from: `shop@${domain.name}`, to: s.to, messageId: s.messageId, subject: 'Your receipt' });

  const suppression = async (address: string) =>
    (
      await sql().execute(`select reason, source_email_id from suppressions where organization_id = ? and email = ?`, [t.orgId, address])
    )[0];
  const inboundRows = async (rcpt: string) =>
    sql().execute(`select outcome, email_id from inbound_messages where ? = any(rcpt_to) order by received_at`, [rcpt]);

  it('sends live mail with a signed VERP return path per recipient at the domain return-path host', async () => {
    const a = `verp-a-${Date.now()}@example.org`;
    const b = `verp-b-${Date.now()}@example.org`;
    const res = await t.call('POST', '/api/v1/emails', { body: { from: `shop@${domain.name}`, to: [a, b], subject: 'Two', text: 'x' } });
    assert.equal(res.status, 200);
    const msgs = await waitFor(async () => {
      const got = env.sink.received.filter((m) => m.envelopeTo.includes(a) || m.envelopeTo.includes(b));
      return got.length === 2 ? got : undefined;
    }, 'one transaction per recipient');
    const paths = msgs.map((m) => m.envelopeFrom);
    for (const p of paths) assert.match(p, new RegExp(`^bounces\\+[a-z2-7]{42}@${domain.return_path.replace(/\./g, '\\.')}$`));
    assert.notEqual(paths[0], paths[1], 'each recipient has its own token');
    assert.equal(msgs[0].parsed.messageId, msgs[1].parsed.messageId, 'one message, one Message-ID');
    for (const m of msgs) assert.deepEqual(m.parsed.to && 'value' in m.parsed.to ? m.parsed.to.value.length : 0, 2, 'both named in To');
  });

  it('a 5.x.x DSN bounces the message hard, suppresses the address, marks the contact bounced and fires a signed webhook', async () => {
    const s = await sendLive('dead');
    assert.equal((await t.call('POST', '/api/v1/contacts', { body: { email: s.to } })).status < 300, true);
    const dsn = await buildDsn({
      to: s.returnPath,
      finalRecipient: s.to,
      status: '5.1.1',
      action: 'failed',
      diagnostic: '550 5.1.1 <user> User unknown',
      original: original(s),
    });
    const reply = await deliverRaw(port(), [s.returnPath], dsn);
    assert.match(reply.response, /^250 /);
    const email = await waitFor(async () => ((await get(s.id)).last_event === 'bounced' ? get(s.id) : undefined), 'status bounced');
    const bounced = email.events.find((e: any) => e.type === 'bounced');
    assert.equal(bounced.bounce_type, 'hard');
    assert.equal(bounced.recipient, s.to);
    assert.match(bounced.detail, /^5\.1\.1 smtp; 550 5\.1\.1 <user> User unknown/);
    assert.deepEqual(await suppression(s.to), { reason: 'bounce', source_email_id: s.id });
    const contact = (await t.call('GET', `/api/v1/contacts/${encodeURIComponent(s.to)}`)).body;
    assert.equal(contact.status, 'bounced');

    const got = await waitFor(
      async () => receiver.received.find((r) => r.json.type === 'email.bounced' && r.json.data.email_id === s.id),
      'the email.bounced webhook',
    );
    assert.ok(new Webhook(hook.secret).verify(got.body, got.headers));
    assert.equal(got.json.data.bounce_type, 'hard');
    assert.equal(got.json.data.recipient, s.to);

    // The same report again (a retrying mail server) records nothing new.
    await deliverRaw(port(), [s.returnPath], dsn);
    await waitFor(
      async () => (await inboundRows(s.returnPath)).length === 2 && (await inboundRows(s.returnPath))[1].outcome,
      'second applied',
    );
    assert.equal((await inboundRows(s.returnPath))[1].outcome, 'duplicate');
    assert.equal((await get(s.id)).events.filter((e: any) => e.type === 'bounced').length, 1);

    // A later send to the bounced address is dropped before queueing.
    const later = await t.call('POST', '/api/v1/emails', { body: { from: `shop@${domain.name}`, to: s.to, subject: 'Again', text: 'x' } });
    assert.equal(later.status, 200);
    assert.deepEqual(later.body.suppressed, [s.to]);
    assert.equal((await get(later.body.id)).last_event, 'suppressed');
  });

  it('applies a message stored before a crash: the processor finds pending rows without being woken', async () => {
    const s = await sendLive('stored');
    const dsn = await buildDsn({
      to: s.returnPath,
      finalRecipient: s.to,
      status: '5.2.1',
      action: 'failed',
      diagnostic: '550 5.2.1 mailbox disabled',
      original: original(s),
    });
    // What the listener had committed when its process died: the row, and no wake-up.
    await sql().execute(`insert into inbound_messages (rcpt_to, size, raw) values (?::text[], ?, ?)`, [
      `{${s.returnPath}}`,
      dsn.length,
      dsn,
    ]);
    await waitFor(async () => (await get(s.id)).last_event === 'bounced', 'the pending row applied by a later pass', 15_000);
    assert.equal((await inboundRows(s.returnPath))[0].outcome, 'bounced');
  });

  it('a 4.x.x DSN records delivery_delayed and changes nothing else', async () => {
    const s = await sendLive('slow');
    const before = s.email.last_event;
    const dsn = await buildDsn({
      to: s.returnPath,
      finalRecipient: s.to,
      status: '4.2.2',
      action: 'delayed',
      diagnostic: '452 4.2.2 Mailbox full',
      original: original(s),
    });
    await deliverRaw(port(), [s.returnPath], dsn);
    const email = await waitFor(
      async () => ((await get(s.id)).events.some((e: any) => e.type === 'delivery_delayed') ? get(s.id) : undefined),
      'delivery_delayed event',
    );
    assert.equal(email.last_event, before);
    assert.match(email.events.find((e: any) => e.type === 'delivery_delayed').detail, /^4\.2\.2 /);
    assert.equal(await suppression(s.to), undefined, 'a soft bounce never suppresses');
  });

  it('an ARF report to complaints@ marks the message complained and suppresses the address, contact status untouched', async () => {
    const s = await sendLive('angry');
    await t.call('POST', '/api/v1/contacts', { body: { email: s.to } });
    const fbl = `complaints@${domain.return_path}`;
    const report = await buildArf({ to: fbl, feedbackType: 'abuse', originalRcptTo: s.to, original: original(s) });
    assert.match((await deliverRaw(port(), [fbl], report)).response, /^250 /);
    const email = await waitFor(async () => ((await get(s.id)).last_event === 'complained' ? get(s.id) : undefined), 'status complained');
    assert.equal(email.events.find((e: any) => e.type === 'complained').detail, 'abuse');
    assert.deepEqual(await suppression(s.to), { reason: 'complaint', source_email_id: s.id });
    assert.equal((await t.call('GET', `/api/v1/contacts/${encodeURIComponent(s.to)}`)).body.status, 'subscribed');
    const got = await waitFor(
      async () => receiver.received.find((r) => r.json.type === 'email.complained' && r.json.data.email_id === s.id),
      'the email.complained webhook',
    );
    assert.ok(new Webhook(hook.secret).verify(got.body, got.headers));
  });

  it('ignores an auto-reply; an unreadable return to a VERP address is an undetermined bounce that does not suppress', async () => {
    const s = await sendLive('away');
    const vacation = await buildPlain({
      to: s.returnPath,
      subject: 'Out of Office: Your receipt',
      headers: { 'Auto-Submitted': 'auto-replied' },
      text: 'I am away until Monday.',
    });
    await deliverRaw(port(), [s.returnPath], vacation);
    await waitFor(async () => (await inboundRows(s.returnPath))[0]?.outcome, 'auto-reply applied');
    assert.equal((await inboundRows(s.returnPath))[0].outcome, 'auto_reply');
    assert.deepEqual(
      (await get(s.id)).events.map((e: any) => e.type),
      s.email.events.map((e: any) => e.type),
      'nothing recorded',
    );

    const odd = await buildPlain({ to: s.returnPath, subject: 'message returned', text: 'Your mail could not be delivered, sorry.' });
    await deliverRaw(port(), [s.returnPath], odd);
    const email = await waitFor(async () => ((await get(s.id)).last_event === 'bounced' ? get(s.id) : undefined), 'undetermined bounce');
    assert.equal(email.events.find((e: any) => e.type === 'bounced').bounce_type, 'undetermined');
    assert.equal(await suppression(s.to), undefined);
  });

  it('refuses unknown addresses and forged tokens at RCPT (550 5.1.1) and stores nothing', async () => {
    const s = await sendLive('forge');
    const token = verpTokenOf(s.returnPath)!;
    // One character changed: the HMAC no longer matches.
    const forged = s.returnPath.replace(token, (token[0] === 'a' ? 'b' : 'a') + token.slice(1));
    const smtp = await RawSmtp.connect(port());
    try {
      await smtp.send('EHLO mx.example.net');
      assert.match(await smtp.send('MAIL FROM:<>'), /^250/);
      assert.match(await smtp.send(`RCPT TO:<${forged}>`), /^550 5\.1\.1 /);
      assert.match(await smtp.send(`RCPT TO:<postmaster@${domain.return_path}>`), /^550 5\.1\.1 /);
      assert.match(await smtp.send(`RCPT TO:<complaints@bounces.unknown-${Date.now()}.example.test>`), /^550 5\.1\.1 /);
      assert.match(await smtp.send(`RCPT TO:<${s.returnPath.toUpperCase()}>`), /^250/, 'a mail system may change the case');
    } finally {
      smtp.close();
    }
    assert.equal((await inboundRows(forged)).length, 0);
  });

  it('drops a feedback report whose quoted return path carries a forged token', async () => {
    const s = await sendLive('forged-arf');
    const token = verpTokenOf(s.returnPath)!;
    const forged = s.returnPath.replace(token, (token[0] === 'a' ? 'b' : 'a') + token.slice(1));
    const fbl = `complaints@${domain.return_path}`;
    const report = await buildArf({
      to: fbl,
      feedbackType: 'abuse',
      originalRcptTo: s.to,
      original: original({ ...s, returnPath: forged }),
    });
    await deliverRaw(port(), [fbl], report);
    await waitFor(async () => {
      const rows = await sql().execute(
        `select outcome from inbound_messages where position(convert_to(?, 'UTF8') in raw) > 0 and processed_at is not null`,
        [s.to],
      );
      return rows[0]?.outcome;
    }, 'the report processed');
    assert.equal(
      (await sql().execute(`select outcome from inbound_messages where position(convert_to(?, 'UTF8') in raw) > 0`, [s.to]))[0].outcome,
      'forged',
    );
    assert.equal((await get(s.id)).last_event, s.email.last_event);
    assert.equal(await suppression(s.to), undefined);
  });

  it('survives odd input: RCPT shapes get 5xx, and junk to a valid address is stored and applied without stopping the processor', async () => {
    const s = await sendLive('junk');
    const smtp = await RawSmtp.connect(port());
    try {
      await smtp.send('EHLO fuzz.example.net');
      await smtp.send('MAIL FROM:<>');
      for (const rcpt of [
        '<bounces+@' + domain.return_path + '>',
        '<bounces+!!!!@' + domain.return_path + '>',
        '<bounces+' + 'a'.repeat(300) + '@' + domain.return_path + '>',
        '<complaints@' + 'x'.repeat(300) + '.example>',
        '<"complaints"@' + domain.return_path + '>',
        '<complaints@[127.0.0.1]>',
        '<>',
        '<' + '\u00e9t\u00e9@' + domain.return_path + '>',
      ]) {
        assert.match(await smtp.send(`RCPT TO:${rcpt}`), /^5\d\d /, rcpt);
      }
      assert.match(await smtp.send('NOOP'), /^250/, 'still talking');
    } finally {
      smtp.close();
    }
    // Deeply nested multiparts, NUL bytes and binary: unreadable, so an undetermined bounce, and the loop goes on.
    let body = 'x';
    for (let i = 0; i < 2000; i++) body = `Content-Type: multipart/mixed; boundary="b${i}"\r\n\r\n--b${i}\r\n${body}\r\n--b${i}--`;
    const junk = Buffer.concat([
      Buffer.from(`To: ${s.returnPath}\r\nSubject: \u0000odd\r\nMIME-Version: 1.0\r\n${body}\r\n`),
      Buffer.from([0, 1, 2, 0xff, 0xfe, 13, 10]),
    ]);
    await deliverRaw(port(), [s.returnPath], junk);
    const email = await waitFor(async () => ((await get(s.id)).last_event === 'bounced' ? get(s.id) : undefined), 'applied');
    assert.equal(email.events.find((e: any) => e.type === 'bounced').bounce_type, 'undetermined');
    // And the next report is applied as usual.
    const next = await sendLive('after-junk');
    const dsn = await buildDsn({
      to: next.returnPath,
      finalRecipient: next.to,
      status: '5.1.1',
      action: 'failed',
      diagnostic: '550 unknown',
      original: original(next),
    });
    await deliverRaw(port(), [next.returnPath], dsn);
    await waitFor(async () => (await get(next.id)).last_event === 'bounced', 'the next report applied');
  });

  it('refuses a message over 10 MiB with 552', async () => {
    const s = await sendLive('huge');
    const big = await buildPlain({ to: s.returnPath, subject: 'big', text: 'x'.repeat(76).concat('\r\n').repeat(140_000) });
    await assert.rejects(deliverRaw(port(), [s.returnPath], big), (err: any) => err.responseCode === 552);
  });

  it('a synchronous 5xx at send time is a hard bounce too: suppression (reason bounce) and contact bounced', async () => {
    const to = `sync-${Date.now()}@example.org`;
    await t.call('POST', '/api/v1/contacts', { body: { email: to } });
    env.sink.rules.set(to, { rcpt: 'reject', code: 550, message: '5.1.1 no such user' });
    const res = await t.call('POST', '/api/v1/emails', { body: { from: `shop@${domain.name}`, to, subject: 'x', text: 'x' } });
    const email = await waitFor(async () => ((await get(res.body.id)).last_event === 'bounced' ? get(res.body.id) : undefined), 'bounced');
    assert.equal(email.events.find((e: any) => e.type === 'bounced').bounce_type, 'hard');
    assert.deepEqual(await suppression(to), { reason: 'bounce', source_email_id: res.body.id });
    assert.equal((await t.call('GET', `/api/v1/contacts/${encodeURIComponent(to)}`)).body.status, 'bounced');
  });
});
