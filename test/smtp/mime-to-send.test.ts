import assert from 'node:assert/strict';
import { simpleParser } from 'mailparser';
import { ServiceError } from '../../core/errors';
import { prepareEmail } from '../../core/emails/prepare';
import { mimeToSend, SenderMismatch, Unparseable } from '../../smtp/mime-to-send';

const KEY = '0190d7a0-0000-7000-8000-000000000001';
const envelope = (to = ['ann@example.com']) => ({ mailFrom: 'bounce@app.example.com', rcptTo: to });
const parse = (raw: string) => simpleParser(raw, { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true });
const head = 'From: App <app@app.example.com>\r\nTo: ann@example.com\r\nSubject: Hi\r\n';

async function map(raw: string, env = envelope()) {
  return mimeToSend(await parse(raw), env, KEY);
}

describe('SMTP relay: a MIME message as a send request', () => {
  it('keeps other headers unfolded, drops trace, reserved and unsubscribe headers, and reads X-Svc-*', async () => {
    const send = await map(
      head +
        'Received: from a by b\r\nX-Received: x\r\nAuthentication-Results: spoofed\r\nMessage-ID: <m1@client.test>\r\n' +
        'List-Unsubscribe: <https://x.test>\r\nX-Folded: one\r\n two\r\nIn-Reply-To: <p@client.test>\r\n' +
        'X-Svc-Kind: transactional.welcome\r\nX-Svc-Tags: a=1; b=x=y;\r\nX-Svc-Unknown: dropped\r\n\r\nbody\r\n',
    );
    assert.deepEqual(send.body.headers, { 'X-Folded': 'one two', 'In-Reply-To': '<p@client.test>' });
    assert.equal(send.body.kind, 'transactional.welcome');
    assert.deepEqual(send.body.tags, [
      { name: 'a', value: '1' },
      { name: 'b', value: 'x=y' },
    ]);
    assert.equal(send.body.idempotency_key, `smtp:${KEY}:<m1@client.test>`);
    assert.equal(send.body.text, 'body\n');
    assert.equal(send.body.html, undefined, 'no html part is made up from the text');
  });

  it('uses X-Svc-Idempotency-Key over the Message-ID; no Message-ID means no key; a huge Message-ID keys by digest', async () => {
    assert.equal((await map(head + 'Message-ID: <m@c.test>\r\nX-Svc-Idempotency-Key: order-7\r\n\r\nx')).body.idempotency_key, 'order-7');
    assert.equal((await map(head + '\r\nx')).body.idempotency_key, undefined);
    const long = `<${'a'.repeat(400)}@c.test>`;
    const key = (await map(head + `Message-ID: ${long}\r\n\r\nx`)).body.idempotency_key as string;
    assert.match(key, new RegExp(`^smtp:${KEY}:sha256:[0-9a-f]{64}$`));
    assert.equal((await map(head + `Message-ID: ${long}\r\n\r\nx`)).body.idempotency_key, key, 'stable');
    // Checked by the send schema, as the API's idempotency_key.
    const tooLong = await map(head + `X-Svc-Idempotency-Key: ${'k'.repeat(257)}\r\n\r\nx`);
    assert.throws(() => prepareEmail(tooLong.body, { inBatch: false, now: new Date() }), ServiceError);
  });

  it('makes bcc of envelope recipients the headers do not name, and only envelope recipients receive', async () => {
    const send = await map(
      'From: "Shop, Inc." <app@app.example.com>\r\nTo: Ann <ann@example.com>, Team: bob@example.com;\r\nCc: cat@example.com\r\nSubject: Hi\r\n\r\nx',
      envelope(['ANN@example.com', 'dan@example.com']),
    );
    assert.equal(send.body.from, '"Shop, Inc." <app@app.example.com>');
    assert.deepEqual(send.body.to, ['Ann <ann@example.com>', 'bob@example.com']);
    assert.deepEqual(send.body.cc, ['cat@example.com']);
    assert.deepEqual(send.body.bcc, ['dan@example.com']);
    const prepared = prepareEmail(send.body, { inBatch: false, now: new Date(), envelope: send.envelope });
    assert.deepEqual(
      prepared.recipients.map((r) => [r.address, r.field]),
      [
        ['ann@example.com', 'to'],
        ['dan@example.com', 'bcc'],
      ],
    );
  });

  it('names unnamed attachments and sends nested messages as opaque files', async () => {
    const raw =
      head +
      'MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n' +
      '--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERg==\r\n' +
      '--b\r\nContent-Type: message/rfc822\r\nContent-Disposition: attachment; filename=fwd.eml\r\n\r\nFrom: x@y.test\r\nSubject: inner\r\n\r\ninner\r\n--b--\r\n';
    const send = await map(raw);
    const atts = send.body.attachments as { filename: string; content_type: string; content: string }[];
    assert.deepEqual(
      atts.map((a) => [a.filename, a.content_type]),
      [
        ['attachment-1', 'application/pdf'],
        ['fwd.eml', 'application/octet-stream'],
      ],
    );
    assert.equal(Buffer.from(atts[0].content, 'base64').toString(), '%PDF');
  });

  it('refuses what is not one sender, or not the envelope sender', async () => {
    await assert.rejects(map('To: ann@example.com\r\nSubject: x\r\n\r\nx'), /From header must name exactly one mailbox/);
    await assert.rejects(map('From: a@app.example.com, b@app.example.com\r\nTo: ann@example.com\r\n\r\nx'), /exactly one mailbox/);
    await assert.rejects(map('From: Team: a@app.example.com;\r\nTo: ann@example.com\r\n\r\nx'), /exactly one mailbox/);
    await assert.rejects(map('From: app@other.example.com\r\nTo: ann@example.com\r\n\r\nx'), SenderMismatch);
    await assert.rejects(map(head + 'X-Dup: 1\r\nX-Dup: 2\r\n\r\nx'), /appears more than once/);
    await assert.rejects(map(head + 'X-Svc-Tags: novalue\r\n\r\nx'), /X-Svc-Tags/);
    await assert.rejects(map('this is not a message\r\n'), Unparseable);
  });
});
