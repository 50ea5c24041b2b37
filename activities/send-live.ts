import type { PassAttachment, PassEmail } from '../db/sql/delivery-pass';
import type { ReturnPaths } from '../core/bounces/verp';
import { parseMailbox, type Mailbox } from '../core/emails/address';
import { feedbackId } from '../core/emails/feedback-id';
import { isBulkKind } from '../core/emails/prepare';
import { recipientParts, type RecipientParts } from '../core/emails/recipient-parts';
import type { RecipientLinks } from '../core/recipient-links';
import { PermanentFailure } from './errors';
import type { Mailer, OutgoingMessage } from './mailer';
import type { Outcomes, PassRecipient } from './pass-outcomes';
import { SendGate } from './send-gate';
import type { Identity } from './sender-identity';
import { relayFailure, RelayAnswers, settleRecipients } from './smtp-outcome';

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
 * Makes what `out` settled durable (activities/delivery-pass.ts: through the process's group
 * commit). Called after each SMTP transaction's answer, inside its send slot: the slot is free again
 * only once the outcome has committed, so what a crash can send twice is at most one transaction
 * per slot. `last`: the message's last answer, with `failure`, what its run retries on (null: none).
 */
export type RecordOutcome = (last: boolean, failure: Error | null) => Promise<void>;

/**
 * Hands one live message to the relay. `recipients` are the ones due now, already committed
 * `in_flight`; `dropped` the addresses suppressed at acceptance, which no header names. Records
 * each recipient's outcome in `out` as its transaction is answered, `record` making it durable,
 * and throws what should be retried.
 */
export type SendLive = (
  out: Outcomes,
  email: PassEmail,
  recipients: PassRecipient[],
  dropped: Set<string>,
  extras: LiveExtras,
  record: RecordOutcome,
) => Promise<void>;

/** The live sender of a worker: every message it hands over shares one gate on the SMTP transactions in flight. */
export function createLiveSender(deps: LiveSenderDeps): SendLive {
  const { returnPaths, links } = deps;
  const gate = new SendGate(deps.sendSlots ?? 16);
  // The direct mailer shapes its own connections per site; this gate only keeps the process's
  // transactions in flight bounded.
  const directGate = new SendGate(DIRECT_SLOTS);

  return async (out, email, recipients, dropped, { attachments, identity }, record) => {
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
      headers: {
        ...email.headers,
        ...parts.headers,
        ...(isBulkKind(email.kind) ? { 'Feedback-ID': feedbackId(email.kind!, email.stream, email.organization_id) } : {}),
      },
      attachments: attachments.map((a) => ({
        filename: a.filename,
        contentType: a.content_type,
        content: a.content,
      })),
      date: messageDate(email),
      ...(identity.dkim ? { dkim: identity.dkim } : {}),
    };
    // VERP: with a return-path host, one SMTP transaction per recipient, each with its own signed
    // `bounces+<token>@host`, so a bounce coming back names exactly one (message, recipient).
    // Without one (domains made by an operator without DNS identity), one transaction for all.
    const host = identity.returnPathHost;
    const transactions =
      host && returnPaths
        ? recipients.map((r) => ({ envelope: { from: returnPaths.address(r.id, host), to: [r.address] }, recipients: [r] }))
        : [{ envelope: { from: from.address, to: recipients.map((r) => r.address) }, recipients }];
    const all = new RelayAnswers();
    let retryLater = 0;
    for (const [i, t] of transactions.entries()) {
      const goOn = await lane.run(email.stream === 'transactional', async () => {
        const answers = new RelayAnswers();
        let goOn = true;
        try {
          answers.took(await mailer.send({ ...message, envelope: t.envelope }));
        } catch (err) {
          goOn = answers.failed(err, t.envelope.to);
        }
        all.add(answers);
        // Interrupted: the recipients of the transactions not tried wait for the retry too.
        const last = !goOn || i === transactions.length - 1;
        const settled = last ? transactions.slice(i).flatMap((x) => x.recipients) : t.recipients;
        retryLater += settleRecipients(out, email, settled, answers, mailer);
        await record(last, last ? relayFailure(all, retryLater) : null);
        return goOn;
      });
      if (!goOn) break;
    }
    const failure = relayFailure(all, retryLater);
    if (failure) throw failure;
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

/**
 * When the message was ready to leave: its acceptance, or its scheduled time when later (mail
 * scheduled for next week is dated next week, not days before its Received headers). Stable over
 * retries, like the rest of the message.
 */
function messageDate(email: PassEmail): Date {
  const accepted = new Date(email.created_at);
  const due = email.scheduled_at === null ? accepted : new Date(email.scheduled_at);
  return due > accepted ? due : accepted;
}

/** A stored address as the one mailbox it was accepted as; anything else cannot be sent. */
function mailbox(stored: string): Mailbox {
  const m = parseMailbox(stored);
  if (!m) throw new PermanentFailure('a stored address is not a single mailbox');
  return m;
}
