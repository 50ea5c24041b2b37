import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import net from 'node:net';
import { dkimVerify } from 'mailauth/lib/dkim/verify';
import { createThreadMailer } from '../../activities/mailer-thread';
import { SmtpTransactionError, type Mailer, type OutgoingMessage } from '../../activities/mailer';
import { SmtpSink } from '../support/sink';

function message(to: string[], extra: Partial<OutgoingMessage> = {}): OutgoingMessage {
  return {
    messageId: `<${Math.random().toString(36).slice(2)}@thread.test>`,
    from: { name: 'Thread Test', address: 'sender@thread.test' },
    to: to.map((address) => ({ name: null, address })),
    cc: [],
    bcc: [],
    replyTo: null,
    subject: 'Über the thread',
    html: '<p>hello</p>',
    text: 'hello',
    headers: { 'X-Entity-Ref': 'abc' },
    attachments: [],
    envelope: { from: 'bounces@thread.test', to },
    date: new Date('2026-11-26T06:00:00Z'),
    ...extra,
  };
}

/** A loopback port with nothing listening. */
async function closedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', () => resolve()));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

describe('mailer on its own thread (activities/mailer-thread.ts)', function () {
  this.timeout(30_000);
  let sink: SmtpSink;
  let mailer: Mailer;

  beforeEach(async () => {
    sink = new SmtpSink();
    mailer = createThreadMailer(await sink.start(), false, 2);
  });
  afterEach(async () => {
    mailer.close();
    await sink.stop();
  });

  it('hands each message to the relay as built on the main thread: envelope, headers, attachments and DKIM signature', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const msg = message(['a@example.com'], {
      attachments: [{ filename: 'note.txt', contentType: 'text/plain', content: Buffer.from('attached bytes') }],
      dkim: { domainName: 'thread.test', keySelector: 'sel', privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() },
    });
    const outcome = await mailer.send(msg);
    assert.deepEqual(outcome, { accepted: ['a@example.com'], rejected: [] });
    const [got] = sink.byMessageId(msg.messageId);
    assert.ok(got, 'the sink received the message');
    assert.equal(got.envelopeFrom, 'bounces@thread.test');
    assert.deepEqual(got.envelopeTo, ['a@example.com']);
    assert.equal(got.parsed.subject, 'Über the thread');
    assert.equal(got.parsed.headers.get('x-entity-ref'), 'abc');
    assert.equal(got.parsed.date?.toISOString(), '2026-11-26T06:00:00.000Z');
    assert.deepEqual(
      got.parsed.attachments.map((a) => [a.filename, a.contentType, a.content.toString()]),
      [['note.txt', 'text/plain', 'attached bytes']],
    );
    // The signature verifies against the key's public half: the private key crossed intact.
    const verified = await dkimVerify(got.raw, {
      resolver: async (name: string, type: string) => {
        assert.equal(`${name}/${type}`, 'sel._domainkey.thread.test/TXT');
        return [[`v=DKIM1; k=rsa; p=${publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`]];
      },
    });
    assert.equal(verified.results[0]?.status?.result, 'pass');
  });

  it('answers many sends at once, each with its own outcome', async () => {
    sink.rules.set('refused@example.com', { rcpt: 'reject', code: 550, message: '5.1.1 no such user' });
    const sends = Array.from({ length: 40 }, (_, i) =>
      mailer.send(message(i % 10 === 3 ? [`r${i}@example.com`, 'refused@example.com'] : [`r${i}@example.com`])),
    );
    const outcomes = await Promise.all(sends);
    outcomes.forEach((o, i) => {
      assert.deepEqual(o.accepted, [`r${i}@example.com`]);
      assert.deepEqual(
        o.rejected.map((r) => [r.address, r.code]),
        i % 10 === 3 ? [['refused@example.com', 550]] : [],
      );
    });
    assert.equal(sink.received.length, 40);
  });

  it('a refused transaction comes back as SmtpTransactionError with its code: permanent for 5xx, not for 4xx', async () => {
    sink.rules.set('gone@example.com', { rcpt: 'reject', code: 550, message: '5.1.1 no such user' });
    sink.rules.set('busy@example.com', { rcpt: 'tempfail', times: 5 });
    const gone = await mailer.send(message(['gone@example.com'])).catch((e) => e);
    assert.ok(gone instanceof SmtpTransactionError, String(gone));
    assert.equal(gone.code, 550);
    assert.equal(gone.permanent, true);
    assert.deepEqual(
      gone.rejected.map((r: { address: string }) => r.address),
      ['gone@example.com'],
    );
    const busy = await mailer.send(message(['busy@example.com'])).catch((e) => e);
    assert.ok(busy instanceof SmtpTransactionError);
    assert.equal(busy.code, 451);
    assert.equal(busy.permanent, false);
  });

  it('a relay that cannot be reached is a transient failure (no code), retried by the engine', async () => {
    const down = createThreadMailer(`smtp://127.0.0.1:${await closedPort()}`, false, 1);
    try {
      const err = await down.send(message(['a@example.com'])).catch((e) => e);
      assert.ok(err instanceof SmtpTransactionError, String(err));
      assert.equal(err.code, null);
      assert.equal(err.permanent, false);
    } finally {
      down.close();
    }
  });

  it('after close, sends are refused instead of waiting forever', async () => {
    await mailer.send(message(['first@example.com']));
    mailer.close();
    const err = await mailer.send(message(['late@example.com'])).catch((e) => e);
    assert.ok(err instanceof SmtpTransactionError);
    assert.equal(sink.received.length, 1);
  });
});
