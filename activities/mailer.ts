import { createPrivateKey, type KeyObject } from 'node:crypto';
import nodemailer from 'nodemailer';
import type Mail from 'nodemailer/lib/mailer';
import { foldableHeaderValue } from '../core/emails/header-lines';
import { wireBodies } from '../core/emails/wire-bodies';
import { signTwice, type DualDkim } from './dkim-sign';

/** One mailbox as a header names it. */
export interface HeaderAddress {
  name: string | null;
  address: string;
}

export interface OutgoingMessage {
  messageId: string;
  from: HeaderAddress;
  to: HeaderAddress[];
  cc: HeaderAddress[];
  bcc: HeaderAddress[];
  replyTo: HeaderAddress | null;
  subject: string;
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
  attachments: { filename: string; contentType: string; content: Buffer }[];
  /** SMTP envelope: who is actually handed the message in this attempt. */
  envelope: { from: string; to: string[] };
  /** The Date header (RFC 5322's date-time, which nodemailer writes from a Date and only from one). */
  date: Date;
  /**
   * Signs the message with the sender domain's key (nodemailer's DKIM signer, relaxed/relaxed, rsa-sha256);
   * with `ed25519` (the domain's active Ed25519 key) signed by both keys instead (signedTwice).
   */
  dkim?: { domainName: string; keySelector: string; privateKey: string; ed25519?: { keySelector: string; privateKey: string } };
}

export interface RecipientRejection {
  address: string;
  /** The reply's code; null when no reply came (a network, DNS, TLS or policy failure). */
  code: number | null;
  response: string;
  /** Direct delivery: the recipient's site is suspended for this sender's addresses until then; not tried before. */
  suspendedUntil?: Date;
}

export interface SendOutcome {
  accepted: string[];
  rejected: RecipientRejection[];
}

/** A reply that refused the whole transaction (MAIL FROM, DATA, or every RCPT). */
export class SmtpTransactionError extends Error {
  constructor(
    message: string,
    readonly code: number | null,
    readonly rejected: RecipientRejection[] = [],
  ) {
    super(message);
    this.name = 'SmtpTransactionError';
  }
  get permanent(): boolean {
    return this.code !== null && this.code >= 500 && this.code < 600;
  }
}

/** Outbound delivery seam: the real relay, the development inbox, or a test's fake. */
export interface Mailer {
  /** True when acceptance means the mailbox itself took it (`delivered`), not just a relay (`sent`). */
  readonly finalDestination: boolean;
  /**
   * Direct delivery: a refusal for now (4xx, no reply) is answered per recipient and the message
   * waits in the database for its next attempt, instead of being thrown and retried by its run.
   */
  readonly defers?: boolean;
  send(msg: OutgoingMessage): Promise<SendOutcome>;
  close(): void;
}

interface SmtpErrorShape {
  responseCode?: number;
  response?: string;
  message: string;
  code?: string;
  rejectedErrors?: { recipient?: string; responseCode?: number; response?: string; message: string }[];
}

function rejections(list: SmtpErrorShape['rejectedErrors'] = []): RecipientRejection[] {
  return list.map((r) => ({ address: (r.recipient ?? '').toLowerCase(), code: r.responseCode ?? null, response: r.response ?? r.message }));
}

/**
 * nodemailer's signed header list plus List-Unsubscribe-Post and Feedback-ID: RFC 8058 one-click
 * needs both List-Unsubscribe headers under the DKIM signature, Gmail's feedback loop trusts a
 * Feedback-ID only when signed, and the default list lacks both.
 */
const DKIM_HEADERS =
  'From:Sender:Reply-To:Subject:Date:Message-ID:To:Cc:MIME-Version:Content-Type:Content-Transfer-Encoding:Content-ID:' +
  'Content-Description:Resent-Date:Resent-From:Resent-Sender:Resent-To:Resent-Cc:Resent-Message-ID:In-Reply-To:References:' +
  'List-Id:List-Help:List-Unsubscribe:List-Unsubscribe-Post:List-Subscribe:List-Post:List-Owner:List-Archive:Feedback-ID';

const headerAddress = (a: HeaderAddress): Mail.Address => ({ name: a.name ?? '', address: a.address });

/**
 * Parsed signing keys by PEM. Signing with a PEM parses it each time (measured: 2.3 ms a
 * signature with a 2048-bit key against 0.95 ms with the parsed key); a sender's few domains
 * sign thousands of messages. Bounded: the oldest key goes when a new one would exceed it.
 */
const parsedKeys = new Map<string, KeyObject>();
const PARSED_KEYS = 64;
function signingKey(pem: string): KeyObject {
  let key = parsedKeys.get(pem);
  if (!key) {
    key = createPrivateKey(pem);
    if (parsedKeys.size >= PARSED_KEYS) parsedKeys.delete(parsedKeys.keys().next().value!);
    parsedKeys.set(pem, key);
  }
  return key;
}

/**
 * The message as nodemailer composes it: both transports (the relay here, direct delivery in
 * activities/delivery/) build the same MIME and DKIM signature from it. Composed where the
 * transport runs (the relay's mailer thread), so deriving an html-only message's text part costs
 * the main thread nothing.
 */
export function mailOptions(msg: OutgoingMessage): Mail.Options {
  const { html, text } = wireBodies(msg.html, msg.text);
  return {
    messageId: msg.messageId,
    // Address objects, not strings: nodemailer quotes or encodes the name, and never re-parses
    // a string that could hold more than one mailbox.
    from: headerAddress(msg.from),
    to: msg.to.map(headerAddress),
    cc: msg.cc.map(headerAddress),
    bcc: msg.bcc.map(headerAddress),
    replyTo: msg.replyTo ? headerAddress(msg.replyTo) : undefined,
    subject: foldableHeaderValue('Subject', msg.subject),
    html: html ?? undefined,
    text: text ?? undefined,
    headers: Object.fromEntries(Object.entries(msg.headers).map(([name, value]) => [name, foldableHeaderValue(name, value)])),
    attachments: msg.attachments.map((a) => ({ filename: a.filename, contentType: a.contentType, content: a.content })),
    envelope: msg.envelope,
    date: msg.date,
    // nodemailer hands the key to crypto's sign(), which takes a KeyObject as well as a PEM.
    ...(msg.dkim
      ? { dkim: { ...msg.dkim, privateKey: signingKey(msg.dkim.privateKey) as unknown as string, headerFieldNames: DKIM_HEADERS } }
      : {}),
    disableFileAccess: true,
    disableUrlAccess: true,
  };
}

/**
 * A message whose domain has an active Ed25519 key (msg.dkim.ed25519): composed, then signed with
 * both keys (RFC 8463; activities/dkim-sign.ts), as options to send on either transport. Others go
 * through mailOptions, nodemailer signing them itself.
 */
export function signedTwice(msg: OutgoingMessage & { dkim: DualDkim }): Promise<Mail.Options> {
  return signTwice(mailOptions({ ...msg, dkim: undefined }), msg.dkim, DKIM_HEADERS);
}

/**
 * The relay (or the dev inbox) over a pool of `connections` SMTP connections kept open between
 * messages: a connection per message cost more than the message (the relay's greeting, its
 * reverse lookup of us, EHLO; about 100 ms on loopback against 11 ms pooled). One transaction
 * per message (or per recipient, VERP) still; a broken connection fails only the transaction on it.
 */
export function createSmtpMailer(url: string, finalDestination: boolean, connections = 8): Mailer {
  const transport = nodemailer.createTransport(
    { url, pool: true, maxConnections: connections },
    { disableFileAccess: true, disableUrlAccess: true },
  );
  return {
    finalDestination,
    async send(msg) {
      const mail = msg.dkim?.ed25519 ? await signedTwice(msg as OutgoingMessage & { dkim: DualDkim }) : mailOptions(msg);
      try {
        const info = await transport.sendMail(mail);
        const accepted = (info.accepted as (string | { address: string })[]).map((a) =>
          (typeof a === 'string' ? a : a.address).toLowerCase(),
        );
        return { accepted, rejected: rejections((info as unknown as SmtpErrorShape).rejectedErrors) };
      } catch (e) {
        const err = e as SmtpErrorShape;
        throw new SmtpTransactionError(err.response ?? err.message, err.responseCode ?? null, rejections(err.rejectedErrors));
      }
    },
    close() {
      transport.close();
    },
  };
}
