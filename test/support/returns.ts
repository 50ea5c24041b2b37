import nodemailer from 'nodemailer';
import MimeNode from 'nodemailer/lib/mime-node';

/**
 * Returned mail built with nodemailer's MIME builder the way a mail server writes it, and handed
 * to a listener over real SMTP with the null sender (as bounces travel).
 */

/** The headers of the message a report is about: what a receiving server saw of ours. */
export function originalHeaders(o: { returnPath: string; from: string; to: string; messageId: string; subject: string }): string {
  return [
    `Return-Path: <${o.returnPath}>`,
    `From: ${o.from}`,
    `To: ${o.to}`,
    `Subject: ${o.subject}`,
    `Message-ID: ${o.messageId}`,
    'Date: Mon, 23 Nov 2026 10:00:00 +0000',
    '',
  ].join('\r\n');
}

/** An RFC 3464 DSN (multipart/report; report-type=delivery-status), as Postfix sends one. */
export function buildDsn(o: {
  to: string;
  finalRecipient: string;
  status: string;
  action: 'failed' | 'delayed' | 'delivered';
  diagnostic: string;
  original: string;
}): Promise<Buffer> {
  const root = new MimeNode('multipart/report; report-type=delivery-status');
  root.setHeader({
    From: 'MAILER-DAEMON@mx.example.net (Mail Delivery System)',
    To: o.to,
    Subject: o.action === 'delayed' ? 'Delayed Mail (still being retried)' : 'Undelivered Mail Returned to Sender',
    // Real DSNs say so too; the report part must still be read first.
    'Auto-Submitted': 'auto-replied',
  });
  root
    .createChild('text/plain')
    .setContent('This is the mail system at host mx.example.net.\r\n\r\nYour message could not be delivered.\r\n');
  root
    .createChild('message/delivery-status')
    .setContent(
      [
        'Reporting-MTA: dns; mx.example.net',
        'Arrival-Date: Mon, 23 Nov 2026 10:00:00 +0000',
        '',
        `Final-Recipient: rfc822; ${o.finalRecipient}`,
        `Action: ${o.action}`,
        `Status: ${o.status}`,
        'Remote-MTA: dns; mx.example.org',
        `Diagnostic-Code: smtp; ${o.diagnostic}`,
        '',
      ].join('\r\n'),
    );
  root.createChild('text/rfc822-headers').setContent(o.original);
  return root.build();
}

/** An RFC 5965 feedback report (ARF), as a mailbox provider's feedback loop sends one. */
export function buildArf(o: { to: string; feedbackType: string; originalRcptTo: string; original: string }): Promise<Buffer> {
  const root = new MimeNode('multipart/report; report-type=feedback-report');
  root.setHeader({ From: 'feedbackloop@fbl.example.net', To: o.to, Subject: 'FW: complaint about a message' });
  root.createChild('text/plain').setContent('This is an email abuse report for a message received from IP 192.0.2.1.\r\n');
  root
    .createChild('message/feedback-report')
    .setContent(
      [
        `Feedback-Type: ${o.feedbackType}`,
        'User-Agent: SomeFBL/1.0',
        'Version: 1',
        `Original-Rcpt-To: <${o.originalRcptTo}>`,
        'Arrival-Date: Mon, 23 Nov 2026 10:00:00 +0000',
        '',
      ].join('\r\n'),
    );
  root.createChild('message/rfc822').setContent(o.original + '\r\nthe message body\r\n');
  return root.build();
}

/** A plain message (an auto-reply, or anything else sent to a bounce address). */
export function buildPlain(o: { to: string; subject: string; headers?: Record<string, string>; text: string }): Promise<Buffer> {
  const root = new MimeNode('text/plain');
  root.setHeader({ From: 'someone@example.org', To: o.to, Subject: o.subject, ...(o.headers ?? {}) });
  root.setContent(o.text);
  return root.build();
}

/** Hands a raw message to an SMTP listener on loopback: MAIL FROM:<>, RCPT TO each of `to`. */
export async function deliverRaw(port: number, to: string[], raw: Buffer): Promise<{ response: string }> {
  const transport = nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    secure: false,
    ignoreTLS: true,
    tls: { rejectUnauthorized: false },
  });
  try {
    const info = await transport.sendMail({ envelope: { from: '', to }, raw });
    return { response: info.response };
  } finally {
    transport.close();
  }
}
