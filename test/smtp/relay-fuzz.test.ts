import assert from 'node:assert/strict';
import { sharedService, newTenant, type TestEnv, type Tenant } from '../support/service';
import { RawSmtp } from '../support/smtp-client';

/**
 * The relay against messages that are odd on purpose (the SMTP side of test/api/fuzz.test.ts):
 * each gets a 250 or a permanent refusal the client caused (5xx), never our 451, and a refused
 * message stores nothing. The connection stays usable after each.
 */
describe('SMTP relay: odd messages', function () {
  let env: TestEnv;
  let t: Tenant;

  before(async function () {
    this.timeout(60_000);
    env = await sharedService();
    t = await newTenant(env);
  });

  const count = async () => (await t.call('GET', '/api/v1/emails?limit=100')).body.data.length as number;

  it('answers every shape with 250 or a 5xx, never 451, and stores only what it accepted', async () => {
    const from = `app@${t.domain}`;
    const head = `From: ${from}\r\nTo: user@example.com\r\nSubject: odd\r\n`;
    let nested = 'text';
    for (let i = 0; i < 60; i++) nested = `Content-Type: multipart/mixed; boundary=b${i}\r\n\r\n--b${i}\r\n${nested}\r\n--b${i}--`;
    const shapes: Record<string, string> = {
      'NUL in a header value': `${head}X-Odd: a\u0000b\r\n\r\nbody`,
      'NUL in the body': `${head}\r\nbo\u0000dy`,
      'NUL in the Message-ID': `${head}Message-ID: <a\u0000b@c.test>\r\n\r\nbody`,
      'NUL in X-Svc-Idempotency-Key': `${head}X-Svc-Idempotency-Key: a\u0000b\r\n\r\nbody`,
      'a header named __proto__': `${head}__proto__: {"polluted": true}\r\n\r\nbody`,
      'a header named constructor': `${head}constructor: x\r\n\r\nbody`,
      'a 100 KB header line': `${head}X-Huge: ${'a'.repeat(100_000)}\r\n\r\nbody`,
      '60 nested multiparts': `${head}MIME-Version: 1.0\r\n${nested}`,
      'broken base64 attachment': `${head}MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: text/plain\r\n\r\nhi\r\n--x\r\nContent-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=a.pdf\r\n\r\n!!!not base64!!!\r\n--x--`,
      'unknown charset': `${head}Content-Type: text/plain; charset=x-made-up\r\n\r\nbody`,
      'malformed encoded word': `From: =?UTF-8?B?###?= <${from}>\r\nTo: user@example.com\r\nSubject: =?X?Q?\r\n\r\nbody`,
      'empty From': `From: <>\r\nTo: user@example.com\r\nSubject: x\r\n\r\nbody`,
      'From with an IP literal': `From: app@[127.0.0.1]\r\nTo: user@example.com\r\nSubject: x\r\n\r\nbody`,
      'line breaks in the subject after decoding': `${head.replace('Subject: odd', 'Subject: =?UTF-8?Q?a=0D=0AInjected:_x?=')}\r\nbody`,
      'a far-future Date header': `${head}Date: Fri, 31 Dec 275759 23:59:59 +0000\r\n\r\nbody`,
      'only headers, no body': head,
      '8-bit garbage': `${head}\r\n\u00ff\u00fe\u00fd`,
      'an X-Svc-Kind with spaces': `${head}X-Svc-Kind: not a kind\r\n\r\nbody`,
      'a tag of 300 characters': `${head}X-Svc-Tags: t=${'v'.repeat(300)}\r\n\r\nbody`,
      'header name with underscore': `${head}X_Under: 1\r\n\r\nbody`,
    };

    const c = await RawSmtp.connect(env.service.relay!.port);
    await c.send('EHLO fuzz.test');
    assert.match(await c.authPlain(t.sendKey), /^235 /);
    const answers: Record<string, string> = {};
    for (const [name, raw] of Object.entries(shapes)) {
      const before = await count();
      assert.match(await c.send(`MAIL FROM:<${from}>`), /^250 /, name);
      assert.match(await c.send('RCPT TO:<user@example.com>'), /^250 /, name);
      assert.match(await c.send('DATA'), /^354 /, name);
      // Dot-stuffing: a line starting with a dot gets a second one.
      const reply = await c.send(`${raw.replace(/\r\n\./g, '\r\n..')}\r\n.\r\n`);
      answers[name] = reply;
      assert.match(reply, /^(250|5\d\d) /, `${name}: ${reply}`);
      assert.equal(await count(), before + (reply.startsWith('250') ? 1 : 0), `${name}: stored only when accepted`);
    }
    c.close();
    if (process.env.FUZZ_SHOW) console.log(answers);
    // The refusals a client must be told about, not silently accepted.
    assert.match(answers['empty From'], /^550 5\.6\.0 /);
    assert.match(answers['From with an IP literal'], /^550 5\.6\.0 /);
    assert.match(answers['header name with underscore'], /^550 5\.6\.0 validation_error/);
    assert.match(answers['an X-Svc-Kind with spaces'], /^550 5\.6\.0 validation_error/);
  });
});
