import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../db/orm';
import { Email, Recipient, EmailEvent, Attachment, Domain, Organization, type EventType } from '../db/entities';
import { suppressAddress } from '../db/sql/suppress-address';
import type { Logger } from 'pino';
import type { SendEmailActivities, DeliverResult } from '../workflows/send-email';
import type { SendBatchActivities, Unsent } from '../workflows/send-batch';
import { describeFailure } from '../workflows/context';
import { claimForDelivery } from '../db/sql/claim-delivery';
import type { Clock } from '../core/clock';
import type { Secrets } from '../core/secrets';
import type { ReturnPaths } from '../core/bounces/verp';
import { parseMailbox, type Mailbox } from '../core/emails/address';
import { isNonRetryable, PermanentFailure, TransientDeliveryError } from './errors';
import { SmtpTransactionError, type Mailer, type RecipientRejection, type OutgoingMessage } from './mailer';
import { testModeOutcome } from './outcomes';
import { SendGate } from './send-gate';
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
  /** SMTP transactions in flight at once, transactional ones served first (default 16: twice the default pool). */
  sendSlots?: number;
}

const FINAL_STATUSES = new Set(['sent', 'delivered', 'bounced', 'complained', 'failed', 'suppressed', 'canceled', 'unconfirmed']);

/** What one delivery pass knows about a message besides its row: loaded once per batch. */
interface Context {
  recipients: Map<string, Recipient[]>;
  attachments: Map<string, Attachment[]>;
  identities: Map<string, Identity>;
  senders: Map<string, { name: string; postalAddress: string } | null>;
}

interface Identity {
  /** Why the domain's identity could not be read (its DKIM key did not open): its messages fail alone, not the batch. */
  error?: unknown;
  dkim?: OutgoingMessage['dkim'];
  returnPathHost?: string;
  trackingHost?: string;
}

/** One message's end of a delivery pass: its status, and the error that kept it from finishing. */
interface Delivered {
  id: string;
  status: string;
  error?: unknown;
}

export function createSendEmailActivities(deps: SendEmailDeps): SendEmailActivities & SendBatchActivities {
  const { orm, mailer, clock, log, secrets, returnPaths, links } = deps;
  const gate = new SendGate(deps.sendSlots ?? 16);

  function event(email: Email, type: EventType, recipient: string, extra: Partial<EmailEvent> = {}): EmailEvent {
    return Object.assign(
      new EmailEvent(),
      { emailId: email.id, organizationId: email.organizationId, type, recipient, at: clock.now() },
      extra,
    );
  }

  /** The message's status from its recipients, already updated by the caller; written by the caller's flush. */
  function finalize(email: Email, recipients: Recipient[]): string {
    const status = aggregateStatus(recipients.map((r) => r.state));
    email.sentAt ??= ['sent', 'delivered', 'bounced', 'complained'].includes(status) ? clock.now() : null;
    email.status = status;
    email.updatedAt = clock.now();
    return status;
  }

  async function load(em: EntityManager, emailId: string): Promise<Email> {
    const email = await em.findOne(Email, { id: emailId }, { populate: ['html', 'text'] });
    if (!email) throw new PermanentFailure(`email ${emailId} does not exist`);
    return email;
  }

  /** Test mode: the outcome table instead of SMTP, recorded on the entities (the caller flushes). */
  function simulate(em: EntityManager, email: Email, recipients: Recipient[]): void {
    for (const r of recipients) {
      const outcome = testModeOutcome(r.address);
      for (const e of outcome.events) em.persist(event(email, e.type, r.address, { bounceType: e.bounceType ?? null }));
      r.state = outcome.state;
      r.attempts += 1;
      r.updatedAt = clock.now();
    }
  }

  /**
   * Hands one message to the relay. `recipients` are the ones due now, already committed
   * `in_flight`; `dropped` the addresses suppressed at acceptance, which no header names. Records
   * each recipient's outcome on the entities (the caller flushes) and throws what should be
   * retried, after recording what earlier transactions settled.
   */
  async function sendLive(em: EntityManager, email: Email, recipients: Recipient[], dropped: Set<string>, ctx: Context): Promise<void> {
    const identity = ctx.identities.get(email.domainId) ?? {};
    if (identity.error !== undefined) throw identity.error;
    const parts = personalParts(email, identity.trackingHost ?? null, recipients, ctx.senders.get(email.organizationId) ?? null);
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
      attachments: (ctx.attachments.get(email.id) ?? []).map((a) => ({
        filename: a.filename,
        contentType: a.contentType,
        content: a.content,
      })),
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
        const outcome = await gate.run(email.stream === 'transactional', () => mailer.send({ ...message, envelope }));
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
  function personalParts(
    email: Email,
    trackingHost: string | null,
    due: Recipient[],
    sender: { name: string; postalAddress: string } | null,
  ): RecipientParts {
    const bulk = isBulkKind(email.kind);
    const tracked = trackingHost !== null && (email.trackOpens || email.trackClicks);
    if ((!bulk && !tracked) || due.length !== 1) return { html: email.html, text: email.text, headers: {} };
    if (!links) throw new PermanentFailure('bulk and tracked mail need signed links, and this worker has none configured');
    const address = due[0].address;
    return recipientParts({
      html: email.html,
      text: email.text,
      unsubscribeUrl: bulk
        ? links.unsubscribeUrl({ organizationId: email.organizationId, emailId: email.id, topicId: email.topicId, address })
        : null,
      sender: bulk ? sender : null,
      pixelUrl: tracked && email.trackOpens ? links.pixelUrl(trackingHost, email.id) : null,
      clickUrl: tracked && email.trackClicks ? (url) => links.clickUrl(trackingHost, email.id, url) : null,
    });
  }

  /**
   * Everything live messages need besides their rows, in one query per kind for the whole batch:
   * attachments, each sender domain's DKIM key (opened once per domain), return-path and
   * tracking hosts, and the postal address of organizations sending bulk mail.
   */
  async function liveContext(em: EntityManager, emails: Email[], ctx: Context): Promise<void> {
    const ids = emails.map((e) => e.id);
    const domainIds = [...new Set(emails.map((e) => e.domainId))];
    const bulkOrgs = [...new Set(emails.filter((e) => isBulkKind(e.kind)).map((e) => e.organizationId))];
    const [attachments, domains, orgs] = await Promise.all([
      em.find(Attachment, { emailId: { $in: ids } }, { orderBy: { emailId: 'asc', position: 'asc' }, populate: ['content'] }),
      em.find(Domain, { id: { $in: domainIds } }, { populate: ['dkimPrivateKeyEnc'] }),
      bulkOrgs.length > 0 ? em.find(Organization, { id: { $in: bulkOrgs } }, { fields: ['name', 'postalAddress'] }) : Promise.resolve([]),
    ]);
    for (const a of attachments) ctx.attachments.set(a.emailId, [...(ctx.attachments.get(a.emailId) ?? []), a]);
    for (const d of domains) {
      try {
        ctx.identities.set(d.id, {
          ...(d.dkimSelector && d.dkimPrivateKeyEnc && secrets
            ? { dkim: { domainName: d.name, keySelector: d.dkimSelector, privateKey: secrets.decrypt(d.dkimPrivateKeyEnc) } }
            : {}),
          ...(d.returnPathHost ? { returnPathHost: d.returnPathHost } : {}),
          ...(d.trackingHost ? { trackingHost: d.trackingHost } : {}),
        });
      } catch (error) {
        ctx.identities.set(d.id, { error });
      }
    }
    for (const o of orgs) ctx.senders.set(o.id, o.postalAddress ? { name: o.name, postalAddress: o.postalAddress } : null);
  }

  /** A hard bounce at send time: the address goes on the list and its contact becomes `bounced`. */
  async function suppress(em: EntityManager, email: Email, address: string): Promise<void> {
    await suppressAddress(em, { organizationId: email.organizationId, address, reason: 'bounce', emailId: email.id, bounceContact: true });
  }

  /**
   * One delivery pass over claimed messages, the same code for a SendEmail run (one message) and
   * a SendBatch run (a chunk): rows read in a few queries for all of them, the live ones'
   * recipients committed `in_flight` together before any SMTP transaction, every live message
   * handed to the relay at once (the mailer's pool bounds the connections), then every outcome
   * (recipient states, events, message statuses) written by one flush. A message whose pass was
   * interrupted keeps its status (`sending`) and comes back with the error to retry on.
   */
  async function deliverMany(emailIds: string[]): Promise<Delivered[]> {
    const em = orm.em.fork();
    const emails = await em.find(Email, { id: { $in: emailIds } }, { populate: ['html', 'text'] });
    const byId = new Map(emails.map((e) => [e.id, e]));
    const done: Delivered[] = [];
    const active: Email[] = [];
    for (const id of emailIds) {
      const email = byId.get(id);
      if (!email) done.push({ id, status: 'failed', error: new PermanentFailure(`email ${id} does not exist`) });
      else if (FINAL_STATUSES.has(email.status)) done.push({ id, status: email.status });
      else if (email.status !== 'sending') {
        done.push({ id, status: email.status, error: new PermanentFailure(`email ${id} is ${email.status}, not claimed for delivery`) });
      } else active.push(email);
    }
    if (active.length === 0) return done;
    const ctx: Context = { recipients: new Map(), attachments: new Map(), identities: new Map(), senders: new Map() };
    for (const r of await em.find(Recipient, { emailId: { $in: active.map((e) => e.id) } }, { orderBy: { id: 'asc' } })) {
      ctx.recipients.set(r.emailId, [...(ctx.recipients.get(r.emailId) ?? []), r]);
    }
    const all = (e: Email) => ctx.recipients.get(e.id) ?? [];
    const due = (e: Email) => all(e).filter(isDue);
    const live = active.filter((e) => e.mode === 'live' && due(e).length > 0);
    for (const email of active) if (email.mode === 'test') simulate(em, email, due(email));
    const errors = new Map<string, unknown>();
    if (live.length > 0) {
      // Commit "in flight" before talking SMTP: a retry then knows these may have been handed over.
      const inFlight = new Map(live.map((e) => [e.id, due(e)]));
      for (const rs of inFlight.values()) {
        for (const r of rs) {
          r.state = 'in_flight';
          r.attempts += 1;
          r.updatedAt = clock.now();
        }
      }
      await em.flush();
      await liveContext(em, live, ctx);
      await Promise.all(
        live.map(async (email) => {
          const dropped = new Set(
            all(email)
              .filter((r) => r.state === 'suppressed')
              .map((r) => r.address),
          );
          try {
            await sendLive(em, email, inFlight.get(email.id) ?? [], dropped, ctx);
          } catch (err) {
            errors.set(email.id, err);
          }
        }),
      );
    }
    const results: Delivered[] = [];
    for (const email of active) {
      const error = errors.get(email.id);
      results.push(
        error === undefined ? { id: email.id, status: finalize(email, all(email)) } : { id: email.id, status: email.status, error },
      );
    }
    await em.flush();
    for (const r of results) {
      if (r.error === undefined) log.info({ emailId: r.id, status: r.status, mode: byId.get(r.id)?.mode }, 'delivery finished');
    }
    return [...done, ...results];
  }

  async function failDelivery(emailId: string, detail: string): Promise<DeliverResult> {
    const em = orm.em.fork();
    const email = await load(em, emailId);
    if (FINAL_STATUSES.has(email.status)) return { status: email.status };
    const recipients = await em.find(Recipient, { emailId });
    for (const r of recipients.filter(isDue)) {
      r.state = 'failed';
      r.updatedAt = clock.now();
      em.persist(event(email, 'failed', r.address, { detail }));
    }
    const status = finalize(email, recipients);
    await em.flush();
    log.warn({ emailId, detail, status }, 'delivery failed');
    return { status };
  }

  return {
    async loadForSend(emailId) {
      const em = orm.em.fork();
      const email = await em.findOne(Email, { id: emailId }, { fields: ['status', 'scheduledAt'] });
      if (!email) throw new PermanentFailure(`email ${emailId} does not exist`);
      return { status: email.status, scheduledAtMs: email.scheduledAt ? email.scheduledAt.getTime() : null };
    },

    async claimForDelivery(emailId) {
      // The workflow id is the email id: the only run that can own it.
      const [row] = await claimForDelivery(orm.em.fork(), { owner: emailId, ids: [emailId], at: clock.now(), acceptUnowned: true });
      if (!row) throw new PermanentFailure(`email ${emailId} does not exist`);
      return row.outcome === 'claimed' ? { outcome: 'claimed' } : { outcome: 'not_queued', status: row.outcome };
    },

    async deliver(emailId) {
      const [r] = await deliverMany([emailId]);
      if (r.error !== undefined) throw r.error;
      return { status: r.status };
    },

    failDelivery,

    async closeUnconfirmed(emailId) {
      return closeUnconfirmed(orm, emailId, clock);
    },

    async claimBatch(batchId, emailIds) {
      const rows = await claimForDelivery(orm.em.fork(), { owner: batchId, ids: emailIds, at: clock.now() });
      const claimed = new Set(rows.filter((r) => r.outcome === 'claimed').map((r) => r.id));
      return emailIds.filter((id) => claimed.has(id));
    },

    async deliverBatch(emailIds) {
      const retry: Unsent[] = [];
      const failed: Unsent[] = [];
      for (const r of await deliverMany(emailIds)) {
        if (r.error === undefined) continue;
        (isNonRetryable(r.error) ? failed : retry).push({ id: r.id, detail: describeFailure(r.error) });
      }
      return { retry, failed };
    },

    async failBatch(items) {
      for (const item of items) await failDelivery(item.id, item.detail);
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
