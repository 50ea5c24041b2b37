import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../db/orm';
import { Email, Recipient, EmailEvent, Attachment, Domain, Organization, type EventType } from '../db/entities';
import { suppressAddress } from '../db/sql/suppress-address';
import type { Logger } from 'pino';
import type { SendEmailActivities, DeliverResult } from '../workflows/send-email';
import type { Clock } from '../core/clock';
import type { Secrets } from '../core/secrets';
import type { ReturnPaths } from '../core/bounces/verp';
import { parseMailbox, type Mailbox } from '../core/emails/address';
import { PermanentFailure, TransientDeliveryError } from './errors';
import { SmtpTransactionError, type Mailer, type RecipientRejection, type OutgoingMessage } from './mailer';
import { testModeOutcome } from './outcomes';
import { aggregateStatus } from '../core/emails/status';
import { isBulkKind } from '../core/emails/prepare';
import { recipientParts, type RecipientParts } from '../core/emails/recipient-parts';
import type { RecipientLinks } from '../core/recipient-links';

export interface SendEmailDeps {
  orm: Orm;
  mailer: Mailer;
  clock: Clock;
  log: Logger;
  /** Opens DKIM private keys; domains created without keys (operator overrides) are sent unsigned. */
  secrets?: Secrets;
  /** Signs each recipient's VERP return path; without it mail leaves with the From address as envelope sender. */
  returnPaths?: ReturnPaths;
  /** Signs unsubscribe and tracking links; without it bulk mail cannot be sent (a permanent failure). */
  links?: RecipientLinks;
}

const FINAL_STATUSES = new Set(['sent', 'delivered', 'bounced', 'complained', 'failed', 'suppressed', 'canceled', 'unconfirmed']);

export function createSendEmailActivities(deps: SendEmailDeps): SendEmailActivities {
  const { orm, mailer, clock, log, secrets, returnPaths, links } = deps;

  function event(email: Email, type: EventType, recipient: string, extra: Partial<EmailEvent> = {}): EmailEvent {
    return Object.assign(
      new EmailEvent(),
      { emailId: email.id, organizationId: email.organizationId, type, recipient, at: clock.now() },
      extra,
    );
  }

  /** The message's status from its recipients, already loaded and updated by the caller. */
  async function finalize(em: EntityManager, email: Email, recipients: Recipient[]): Promise<DeliverResult> {
    const status = aggregateStatus(recipients.map((r) => r.state));
    const sentAt = email.sentAt ?? (['sent', 'delivered', 'bounced', 'complained'].includes(status) ? clock.now() : null);
    await em.nativeUpdate(Email, { id: email.id }, { status, sentAt, updatedAt: clock.now() });
    return { status };
  }

  async function load(em: EntityManager, emailId: string): Promise<Email> {
    const email = await em.findOne(Email, { id: emailId }, { populate: ['html', 'text'] });
    if (!email) throw new PermanentFailure(`email ${emailId} does not exist`);
    return email;
  }

  async function simulate(em: EntityManager, email: Email, recipients: Recipient[]): Promise<void> {
    for (const r of recipients) {
      const outcome = testModeOutcome(r.address);
      for (const e of outcome.events) em.persist(event(email, e.type, r.address, { bounceType: e.bounceType ?? null }));
      r.state = outcome.state;
      r.attempts += 1;
      r.updatedAt = clock.now();
    }
    await em.flush();
  }

  /** `recipients` are the ones due now; `dropped` the addresses suppressed at acceptance, which no header names. */
  async function sendLive(em: EntityManager, email: Email, recipients: Recipient[], dropped: Set<string>): Promise<void> {
    // Commit "in flight" before talking SMTP: a retry then knows these may have been handed over.
    for (const r of recipients) {
      r.state = 'in_flight';
      r.attempts += 1;
      r.updatedAt = clock.now();
    }
    await em.flush();
    const attachments = await em.find(Attachment, { emailId: email.id }, { orderBy: { position: 'asc' }, populate: ['content'] });
    const identity = await sendingIdentity(em, email);
    const parts = await personalParts(em, email, identity.trackingHost ?? null, recipients);
    const from = mailbox(email.from);
    const message: Omit<OutgoingMessage, 'envelope'> = {
      messageId: email.messageId,
      // Headers are written from the parsed mailboxes, never from the stored strings: what the
      // API checked (one mailbox each) is exactly what the headers name.
      from,
      to: email.to.map(mailbox).filter((m) => !dropped.has(m.normalized)),
      cc: email.cc.map(mailbox).filter((m) => !dropped.has(m.normalized)),
      bcc: email.bcc.map(mailbox),
      replyTo: email.replyTo === null ? null : mailbox(email.replyTo),
      subject: email.subject,
      html: parts.html,
      text: parts.text,
      headers: { ...email.headers, ...parts.headers },
      attachments: attachments.map((a) => ({ filename: a.filename, contentType: a.contentType, content: a.content })),
      date: email.createdAt,
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
    const accepted: string[] = [];
    const rejected: RecipientRejection[] = [];
    let interrupted: unknown = null;
    for (const envelope of envelopes) {
      try {
        const outcome = await mailer.send({ ...message, envelope });
        accepted.push(...outcome.accepted);
        rejected.push(...outcome.rejected);
      } catch (err) {
        if (err instanceof SmtpTransactionError && err.rejected.length > 0) {
          rejected.push(...err.rejected);
        } else if (err instanceof SmtpTransactionError && err.code !== null) {
          // The relay refused the whole transaction (MAIL FROM or DATA): 5xx is a hard bounce for
          // each recipient of it, 4xx a retry for them; the other transactions go on.
          rejected.push(...envelope.to.map((address) => ({ address, code: err.code, response: err.message })));
        } else {
          // The connection or the relay failed: this and the remaining recipients wait for the retry;
          // what earlier transactions settled is recorded first.
          interrupted = err;
          break;
        }
      }
    }
    const acceptedSet = new Set(accepted);
    const rejectedBy = new Map(rejected.map((r) => [r.address, r]));
    let retryLater = 0;
    for (const r of recipients) {
      const rej = rejectedBy.get(r.address);
      if (acceptedSet.has(r.address) && !rej) {
        em.persist(event(email, 'sent', r.address));
        if (mailer.finalDestination) em.persist(event(email, 'delivered', r.address));
        r.state = mailer.finalDestination ? 'delivered' : 'sent';
      } else if (rej && rej.code !== null && rej.code >= 500) {
        em.persist(event(email, 'bounced', r.address, { bounceType: 'hard', detail: rej.response.slice(0, 1000) }));
        r.state = 'bounced';
        await suppress(em, email, r.address);
      } else {
        r.state = 'pending';
        retryLater += 1;
      }
      r.updatedAt = clock.now();
    }
    await em.flush();
    if (interrupted !== null && !(interrupted instanceof SmtpTransactionError)) throw interrupted;
    if (interrupted instanceof SmtpTransactionError) {
      throw new TransientDeliveryError(`SMTP ${interrupted.code ?? 'connection'} error: ${interrupted.message}`);
    }
    if (retryLater > 0) {
      throw new TransientDeliveryError(
        `${retryLater} recipient(s) temporarily refused: ${rejected
          .map((r) => r.response)
          .join('; ')
          .slice(0, 500)}`,
      );
    }
  }

  /**
   * What the one recipient of bulk or tracked mail gets beyond the stored message (unsubscribe
   * headers and footer, click redirects, open pixel; core/emails/recipient-parts.ts). Both need
   * exactly one recipient, which acceptance enforces.
   */
  async function personalParts(em: EntityManager, email: Email, trackingHost: string | null, due: Recipient[]): Promise<RecipientParts> {
    const bulk = isBulkKind(email.kind);
    const tracked = trackingHost !== null && (email.trackOpens || email.trackClicks);
    if ((!bulk && !tracked) || due.length !== 1) return { html: email.html, text: email.text, headers: {} };
    if (!links) throw new PermanentFailure('bulk and tracked mail need signed links, and this worker has none configured');
    const address = due[0].address;
    let sender: { name: string; postalAddress: string } | null = null;
    if (bulk) {
      const org = await em.findOne(Organization, { id: email.organizationId }, { fields: ['name', 'postalAddress'] });
      if (org?.postalAddress) sender = { name: org.name, postalAddress: org.postalAddress };
    }
    return recipientParts({
      html: email.html,
      text: email.text,
      unsubscribeUrl: bulk
        ? links.unsubscribeUrl({ organizationId: email.organizationId, emailId: email.id, topicId: email.topicId, address })
        : null,
      sender,
      pixelUrl: tracked && email.trackOpens ? links.pixelUrl(trackingHost, email.id) : null,
      clickUrl: tracked && email.trackClicks ? (url) => links.clickUrl(trackingHost, email.id, url) : null,
    });
  }

  /** The sender domain's DKIM key, return-path and tracking hosts, when it has them (created through the API). */
  async function sendingIdentity(
    em: EntityManager,
    email: Email,
  ): Promise<{ dkim?: OutgoingMessage['dkim']; returnPathHost?: string; trackingHost?: string }> {
    const domain = await em.findOne(Domain, { id: email.domainId }, { populate: ['dkimPrivateKeyEnc'] });
    if (!domain) return {};
    return {
      ...(domain.dkimSelector && domain.dkimPrivateKeyEnc && secrets
        ? { dkim: { domainName: domain.name, keySelector: domain.dkimSelector, privateKey: secrets.decrypt(domain.dkimPrivateKeyEnc) } }
        : {}),
      ...(domain.returnPathHost ? { returnPathHost: domain.returnPathHost } : {}),
      ...(domain.trackingHost ? { trackingHost: domain.trackingHost } : {}),
    };
  }

  /** A hard bounce at send time: the address goes on the list and its contact becomes `bounced`. */
  async function suppress(em: EntityManager, email: Email, address: string): Promise<void> {
    await suppressAddress(em, { organizationId: email.organizationId, address, reason: 'bounce', emailId: email.id, bounceContact: true });
  }

  return {
    async loadForSend(emailId) {
      const em = orm.em.fork();
      const email = await em.findOne(Email, { id: emailId }, { fields: ['status', 'scheduledAt'] });
      if (!email) throw new PermanentFailure(`email ${emailId} does not exist`);
      return { status: email.status, scheduledAtMs: email.scheduledAt ? email.scheduledAt.getTime() : null };
    },

    async claimForDelivery(emailId) {
      const em = orm.em.fork();
      const won = await em.nativeUpdate(Email, { id: emailId, status: 'queued' }, { status: 'sending', updatedAt: clock.now() });
      if (won === 1) return { outcome: 'claimed' };
      const email = await em.findOne(Email, { id: emailId }, { fields: ['status'] });
      if (!email) throw new PermanentFailure(`email ${emailId} does not exist`);
      // Already `sending`: this worker claimed it before a crash and resumes the delivery.
      if (email.status === 'sending') return { outcome: 'claimed' };
      return { outcome: 'not_queued', status: email.status };
    },

    async deliver(emailId) {
      const em = orm.em.fork();
      const email = await load(em, emailId);
      if (FINAL_STATUSES.has(email.status)) return { status: email.status };
      if (email.status !== 'sending') throw new PermanentFailure(`email ${emailId} is ${email.status}, not claimed for delivery`);
      const recipients = await em.find(Recipient, { emailId }, { orderBy: { id: 'asc' } });
      const due = recipients.filter(isDue);
      if (due.length > 0) {
        if (email.mode === 'test') await simulate(em, email, due);
        else await sendLive(em, email, due, new Set(recipients.filter((r) => r.state === 'suppressed').map((r) => r.address)));
      }
      const result = await finalize(em, email, recipients);
      log.info({ emailId, status: result.status, mode: email.mode }, 'delivery finished');
      return result;
    },

    async failDelivery(emailId, detail) {
      const em = orm.em.fork();
      const email = await load(em, emailId);
      if (FINAL_STATUSES.has(email.status)) return { status: email.status };
      const recipients = await em.find(Recipient, { emailId });
      for (const r of recipients.filter(isDue)) {
        r.state = 'failed';
        r.updatedAt = clock.now();
        em.persist(event(email, 'failed', r.address, { detail }));
      }
      await em.flush();
      const result = await finalize(em, email, recipients);
      log.warn({ emailId, detail, status: result.status }, 'delivery failed');
      return result;
    },

    async closeUnconfirmed(emailId) {
      return closeUnconfirmed(orm, emailId, clock);
    },
  };
}

/**
 * The operator's close: only a message the relay accepted and nothing confirmed since (`sent`)
 * becomes `unconfirmed`; shared by the workflow activity and `svc email close-unconfirmed`.
 */
export async function closeUnconfirmed(orm: Orm, emailId: string, clock: Clock): Promise<DeliverResult> {
  const em = orm.em.fork();
  await em.nativeUpdate(Email, { id: emailId, status: 'sent' }, { status: 'unconfirmed', updatedAt: clock.now() });
  const email = await em.findOne(Email, { id: emailId }, { fields: ['status'] });
  if (!email) throw new PermanentFailure(`email ${emailId} does not exist`);
  return { status: email.status };
}

const isDue = (r: Recipient) => r.state === 'pending' || r.state === 'in_flight';

/** A stored address as the one mailbox it was accepted as; anything else cannot be sent. */
function mailbox(stored: string): Mailbox {
  const m = parseMailbox(stored);
  if (!m) throw new PermanentFailure('a stored address is not a single mailbox');
  return m;
}
