import type { PassAttachment, PassEmail } from '../db/sql/delivery-pass';
import type { ReturnPaths } from '../core/bounces/verp';
import { parseMailbox, type Mailbox } from '../core/emails/address';
import { isBulkKind } from '../core/emails/prepare';
import { recipientParts, type RecipientParts } from '../core/emails/recipient-parts';
import type { RecipientLinks } from '../core/recipient-links';
import { PermanentFailure } from './errors';
import type { Mailer, OutgoingMessage } from './mailer';
import type { Outcomes, PassRecipient } from './pass-outcomes';
import { SendGate } from './send-gate';
import type { Identity } from './sender-identity';
import { RelayAnswers, settleRecipients } from './smtp-outcome';

export interface LiveSenderDeps {
  mailer: Mailer;
  /** Direct delivery to each recipient domain's MX, for senders whose transport is `direct`; absent: their mail waits (an error retried). */
  direct?: Mailer;
  /** Signs each recipient's VERP return path; without it mail leaves with the From address as envelope sender. */
  returnPaths?: ReturnPaths;
  /** Signs unsubscribe and tracking links; without it bulk mail cannot be sent (a permanent failure). */
  links?: RecipientLinks;
  /** SMTP transactions in flight at once, transactional ones served first (default 16: twice the default pool). */
  sendSlots?: number;
}

/** Direct SMTP transactions in flight at once per process, across every site (each site's own limits apply within). */
const DIRECT_SLOTS = 512;

/** What one live message needs besides its row: its attachments and its sender domain's identity. */
export interface LiveExtras {
  attachments: PassAttachment[];
  identity: Identity;
}

/**
 * Hands one live message to the relay. `recipients` are the ones due now, already committed
 * `in_flight`; `dropped` the addresses suppressed at acceptance, which no header names. Records
 * each recipient's outcome in `out` and throws what should be retried, after recording what
 * earlier transactions settled.
 */
export type SendLive = (
  out: Outcomes,
  email: PassEmail,
  recipients: PassRecipient[],
  dropped: Set<string>,
  extras: LiveExtras,
) => Promise<void>;

/** The live sender of a worker: every message it hands over shares one gate on the SMTP transactions in flight. */
export function createLiveSender(deps: LiveSenderDeps): SendLive {
  const { returnPaths, links } = deps;
  const gate = new SendGate(deps.sendSlots ?? 16);
  // The direct mailer shapes its own connections per site; this gate only keeps the process's
  // transactions in flight bounded.
  const directGate = new SendGate(DIRECT_SLOTS);

  return async (out, email, recipients, dropped, { attachments, identity }) => {
    if (identity.error !== undefined) throw identity.error;
    const direct = identity.transport === 'direct';
    if (direct && !deps.direct) throw new Error('this worker has no direct transport configured');
    const mailer = direct ? deps.direct! : deps.mailer;
    const lane = direct ? directGate : gate;
    const parts = personalParts(links, email, identity.trackingHost ?? null, recipients, identity.sender ?? null);
    const from = mailbox(email.from_address);
    const message: Omit<OutgoingMessage, 'envelope'> = {
      messageId: email.message_id,
      // Headers are written from the parsed mailboxes, never from the stored strings: what the
      // API checked (one mailbox each) is exactly what the headers name.
      from,
      to: email.to_addresses.map(mailbox).filter((m) => !dropped.has(m.normalized)),
      cc: email.cc_addresses.map(mailbox).filter((m) => !dropped.has(m.normalized)),
      bcc: email.bcc_addresses.map(mailbox),
      replyTo: email.reply_to === null ? null : mailbox(email.reply_to),
      subject: email.subject,
      html: parts.html,
      text: parts.text,
      headers: { ...email.headers, ...parts.headers },
      attachments: attachments.map((a) => ({
        filename: a.filename,
        contentType: a.content_type,
        content: a.content,
      })),
      date: email.created_at,
      ...(identity.dkim ? { dkim: identity.dkim } : {}),
    };
    // VERP: with a return-path host, one SMTP transaction per recipient, each with its own signed
    // `bounces+<token>@host`, so a bounce coming back names exactly one (message, recipient).
    // Without one (domains made by an operator without DNS identity), one transaction for all.
    const host = identity.returnPathHost;
    const envelopes =
      host && returnPaths
        ? recipients.map((r) => ({ from: returnPaths.address(r.id, host), to: [r.address] }))
        : [{ from: from.address, to: recipients.map((r) => r.address) }];
    const answers = new RelayAnswers();
    for (const envelope of envelopes) {
      try {
        answers.took(await lane.run(email.stream === 'transactional', () => mailer.send({ ...message, envelope })));
      } catch (err) {
        if (!answers.failed(err, envelope.to)) break;
      }
    }
    settleRecipients(out, email, recipients, answers, mailer);
  };
}

/**
 * What the one recipient of bulk or tracked mail gets beyond the stored message (unsubscribe
 * headers and footer, click redirects, open pixel; core/emails/recipient-parts.ts). Both need
 * exactly one recipient, which acceptance enforces.
 */
function personalParts(
  links: RecipientLinks | undefined,
  email: PassEmail,
  trackingHost: string | null,
  due: PassRecipient[],
  sender: { name: string; postalAddress: string } | null,
): RecipientParts {
  const bulk = isBulkKind(email.kind);
  const tracked = trackingHost !== null && (email.track_opens || email.track_clicks);
  if ((!bulk && !tracked) || due.length !== 1) return { html: email.html, text: email.text, headers: {} };
  if (!links) throw new PermanentFailure('bulk and tracked mail need signed links, and this worker has none configured');
  const address = due[0].address;
  return recipientParts({
    html: email.html,
    text: email.text,
    unsubscribeUrl: bulk
      ? links.unsubscribeUrl({ organizationId: email.organization_id, emailId: email.id, topicId: email.topic_id, address })
      : null,
    sender: bulk ? sender : null,
    pixelUrl: tracked && email.track_opens ? links.pixelUrl(trackingHost, email.id) : null,
    clickUrl: tracked && email.track_clicks ? (url) => links.clickUrl(trackingHost, email.id, url) : null,
  });
}

/** A stored address as the one mailbox it was accepted as; anything else cannot be sent. */
function mailbox(stored: string): Mailbox {
  const m = parseMailbox(stored);
  if (!m) throw new PermanentFailure('a stored address is not a single mailbox');
  return m;
}
