import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { classifyReturn } from '../../core/bounces/classify';
import { findReport } from '../../core/bounces/report';
import { readVerpToken, verpAddress, verpToken, verpTokenOf } from '../../core/bounces/verp';

const crlf = (lines: string[]) => lines.join('\r\n');

/** A Postfix bounce, as Postfix writes it (multipart/report with a text part, the DSN, the headers). */
const postfixDsn = (status: string, action: string, diagnostic: string, extraHeaders: string[] = []) =>
  crlf([
    'Return-Path: <>',
    'From: MAILER-DAEMON@mx.example.net (Mail Delivery System)',
    'To: bounces+token@feedback.example.com',
    'Subject: Undelivered Mail Returned to Sender',
    ...extraHeaders,
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status;',
    '\tboundary="4B2A63C1.1700000000/mx.example.net"',
    '',
    'This is a MIME-encapsulated message.',
    '',
    '--4B2A63C1.1700000000/mx.example.net',
    'Content-Description: Notification',
    'Content-Type: text/plain; charset=us-ascii',
    '',
    "I'm sorry to have to inform you that your message could not be delivered.",
    '',
    '--4B2A63C1.1700000000/mx.example.net',
    'Content-Description: Delivery report',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.example.net',
    'X-Postfix-Queue-ID: 4B2A63C1',
    'Arrival-Date: Mon, 23 Nov 2026 10:00:00 +0000 (UTC)',
    '',
    'Final-Recipient: rfc822; Ann@Example.org',
    'Original-Recipient: rfc822;ann@example.org',
    `Action: ${action}`,
    `Status: ${status}`,
    'Remote-MTA: dns; mx.example.org',
    `Diagnostic-Code: smtp; ${diagnostic}`,
    '    (in reply to RCPT TO command)',
    '',
    '--4B2A63C1.1700000000/mx.example.net',
    'Content-Description: Undelivered Message Headers',
    'Content-Type: text/rfc822-headers',
    '',
    'Message-ID: <0190d7a0@mail.example.com>',
    'Subject: Your receipt',
    '',
    '--4B2A63C1.1700000000/mx.example.net--',
    '',
  ]);

/** An ARF complaint as Yahoo and others send it. */
const arf = crlf([
  'From: feedbackloop@fbl.example.net',
  'To: bounces+token@feedback.example.com',
  'Subject: FW: Your receipt',
  'MIME-Version: 1.0',
  'Content-Type: multipart/report; report-type=feedback-report; boundary="part1"',
  '',
  '--part1',
  'Content-Type: text/plain; charset="US-ASCII"',
  '',
  'This is an email abuse report for an email message received from IP 192.0.2.1.',
  '--part1',
  'Content-Type: message/feedback-report',
  '',
  'Feedback-Type: abuse',
  'User-Agent: SomeGenerator/1.0',
  'Version: 1',
  'Original-Mail-From: <bounces+token@feedback.example.com>',
  'Original-Rcpt-To: <Bob@example.org>',
  'Arrival-Date: Mon, 23 Nov 2026 10:00:00 +0000',
  '',
  '--part1',
  'Content-Type: message/rfc822',
  'Content-Disposition: inline',
  '',
  'From: <shop@example.com>',
  'Subject: Your receipt',
  '',
  'body',
  '--part1--',
  '',
]);

describe('Core: returned mail (DSN and ARF readers, VERP tokens)', () => {
  it('reads a Postfix hard bounce: status and diagnostic as detail, the final recipient', () => {
    const out = classifyReturn(postfixDsn('5.1.1', 'failed', '550 5.1.1 <ann@example.org>: Recipient address rejected: User unknown'));
    assert.deepEqual(out, {
      kind: 'bounced',
      bounceType: 'hard',
      detail: '5.1.1 smtp; 550 5.1.1 <ann@example.org>: Recipient address rejected: User unknown (in reply to RCPT TO command)',
      recipient: 'ann@example.org',
    });
  });

  it('reads a 4.x.x DSN as a delay, and reads the report even when the DSN says Auto-Submitted', () => {
    const out = classifyReturn(postfixDsn('4.4.1', 'delayed', '421 4.4.1 connection timed out', ['Auto-Submitted: auto-replied']));
    assert.equal(out.kind, 'delivery_delayed');
    assert.match((out as { detail: string }).detail, /^4\.4\.1 smtp; 421/);
    const hard = classifyReturn(postfixDsn('5.2.1', 'failed', '550 mailbox disabled', ['Auto-Submitted: auto-replied']));
    assert.equal(hard.kind, 'bounced', 'the report is read before the auto-reply headers');
  });

  it('finds the report nested in multipart/mixed and base64-encoded, and ignores a DSN of successes', () => {
    const dsnBody = crlf([
      'Reporting-MTA: dns; mx.example.net',
      '',
      'Final-Recipient: rfc822; c@example.org',
      'Action: failed',
      'Status: 5.7.1',
      '',
    ]);
    const nested = crlf([
      'From: postmaster@example.net',
      'Content-Type: multipart/mixed; boundary=outer',
      '',
      '--outer',
      'Content-Type: multipart/report; report-type=delivery-status; boundary=inner',
      '',
      '--inner',
      'Content-Type: text/plain',
      '',
      'hello',
      '--inner',
      'Content-Type: message/delivery-status',
      'Content-Transfer-Encoding: base64',
      '',
      Buffer.from(dsnBody).toString('base64'),
      '--inner--',
      '--outer--',
    ]);
    const out = classifyReturn(nested);
    assert.equal(out.kind, 'bounced');
    assert.equal((out as { recipient: string }).recipient, 'c@example.org');
    assert.equal(classifyReturn(postfixDsn('2.0.0', 'delivered', '250 ok')).kind, 'success_report');
    assert.equal(classifyReturn(postfixDsn('', 'relayed', 'relayed to a non-DSN system')).kind, 'success_report');
    assert.equal(classifyReturn(postfixDsn('', 'failed', 'no status')).kind, 'unreadable');
  });

  it('reads an ARF report as a complaint with its feedback type and original recipient', () => {
    assert.deepEqual(classifyReturn(arf), { kind: 'complained', detail: 'abuse', recipient: 'bob@example.org' });
    assert.equal(findReport(arf)?.type, 'feedback-report');
  });

  it('ignores auto-replies without a report; anything else without one is unreadable', () => {
    const plain = (headers: string[]) => crlf(['From: ann@example.org', 'To: bounces+t@feedback.example.com', ...headers, '', 'I am away']);
    assert.equal(classifyReturn(plain(['Subject: Re: hi', 'Auto-Submitted: auto-replied'])).kind, 'auto_reply');
    assert.equal(classifyReturn(plain(['Subject: Re: hi', 'X-Autoreply: yes'])).kind, 'auto_reply');
    assert.equal(classifyReturn(plain(['Subject: Out of Office: back Monday'])).kind, 'auto_reply');
    assert.equal(classifyReturn(plain(['Subject: =?UTF-8?Q?x?=']), { subject: 'Vacation reply' }).kind, 'auto_reply');
    assert.equal(classifyReturn(plain(['Subject: Re: hi', 'Auto-Submitted: no'])).kind, 'unreadable');
    assert.equal(classifyReturn('not a message at all').kind, 'unreadable');
  });

  it('VERP tokens name one recipient, survive case changes, and refuse forgeries', () => {
    const secret = randomBytes(32);
    const id = '0190d7a0-1234-7abc-8def-0123456789ab';
    const token = verpToken(secret, id);
    const address = verpAddress(token, 'feedback.example.com');
    assert.match(address, /^bounces\+[a-z2-7]{42}@feedback\.example\.com$/);
    assert.ok(address.split('@')[0].length <= 64, 'a local part has at most 64 characters');
    assert.equal(verpTokenOf(address.toUpperCase()), token);
    assert.equal(readVerpToken(secret, verpTokenOf(address.toUpperCase())!), id);
    assert.equal(readVerpToken(randomBytes(32), token), null, 'another secret');
    const flipped = token.slice(0, 10) + (token[10] === 'a' ? 'b' : 'a') + token.slice(11);
    assert.equal(readVerpToken(secret, flipped), null, 'a changed id');
    assert.equal(readVerpToken(secret, token.slice(0, -1)), null, 'too short');
    assert.equal(readVerpToken(secret, `${token.slice(0, -1)}1`), null, 'not base32');
    assert.equal(verpTokenOf('postmaster@feedback.example.com'), null);
    assert.equal(verpTokenOf('bounces+@feedback.example.com'), null);
  });
});
