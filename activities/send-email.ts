import type { Orm } from '../db/orm';
import { Email, type EmailStatus, type EventType, type RecipientState } from '../db/entities';
import {
  markInFlight,
  readPassAttachments,
  readPassDomains,
  readPassEmails,
  recordPassOutcomes,
  type PassAttachment,
  type PassEmail,
  type PassOutcomes,
} from '../db/sql/delivery-pass';
import { suppressAddress } from '../db/sql/suppress-address';
import type { Logger } from 'pino';
import type { SendEmailActivities, DeliverResult } from '../workflows/send-email';
import type { SendBatchActivities, Unsent } from '../workflows/send-batch';
import { describeFailure } from '../workflows/context';
import { claimForDelivery } from '../db/sql/claim-delivery';
import { handBackScheduled } from '../db/sql/scheduled-timers';
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
const SENT_STATUSES = new Set(['sent', 'delivered', 'bounced', 'complained']);

/** A recipient during a pass; `tried` counts an attempt the in_flight statement did not (test mode). */
interface PassRecipient {
  id: string;
  address: string;
  state: RecipientState;
  tried: number;
}

/** A claimed message during a pass, with all its recipients (the due ones and those dropped at acceptance). */
interface Message {
  email: PassEmail;
  recipients: PassRecipient[];
}

/** What one delivery pass knows besides the messages: loaded once per pass. */
interface Context {
  attachments: Map<string, PassAttachment[]>;
  /** By sender domain id. */
  identities: Map<string, Identity>;
}

interface Identity {
  /** Why the domain's identity could not be read (its DKIM key did not open): its messages fail alone, not the batch. */
  error?: unknown;
  dkim?: OutgoingMessage['dkim'];
  returnPathHost?: string;
  trackingHost?: string;
  /** The organization's name and postal address, for the bulk footer; null without a postal address. */
  sender?: { name: string; postalAddress: string } | null;
}

/** One message's end of a delivery pass: its status, and the error that kept it from finishing. */
interface Delivered {
  id: string;
  status: string;
  error?: unknown;
}

/** What a pass settles, written by one statement at its end (db/sql/delivery-pass.ts). */
class Outcomes {
  readonly changed = new Set<PassRecipient>();
  readonly events: PassOutcomes['events'] = [];
  readonly emails: PassOutcomes['emails'] = [];
  /** Hard bounces at send time: the address goes on the list and its contact becomes `bounced`. */
  readonly suppress: { organizationId: string; address: string; emailId: string }[] = [];

  event(email: PassEmail, type: EventType, recipient: string, extra: { bounceType?: string | null; detail?: string | null } = {}): void {
    this.events.push({
      emailId: email.id,
      organizationId: email.organization_id,
      type,
      recipient,
      bounceType: extra.bounceType ?? null,
      detail: extra.detail ?? null,
    });
  }

  set(r: PassRecipient, state: RecipientState): void {
    r.state = state;
    this.changed.add(r);
  }

  /** The message's status from its recipients, already updated; returned and written with the rest. */
  finish(m: Message): EmailStatus {
    const status = aggregateStatus(m.recipients.map((r) => r.state));
    this.emails.push({ id: m.email.id, status, sent: SENT_STATUSES.has(status) });
    return status;
  }

  async write(orm: Orm, at: Date): Promise<void> {
    // Listed before the outcome commits: a crash in between sends again to a listed address
    // (bounced again), never records a bounce whose address is not listed.
    for (const s of this.suppress) {
      await suppressAddress(orm.em.fork(), { ...s, reason: 'bounce', bounceContact: true });
    }
    await recordPassOutcomes(orm, {
      at,
      recipients: [...this.changed].map((r) => ({ id: r.id, state: r.state, tried: r.tried })),
      events: this.events,
      emails: this.emails,
    });
  }
}

export function createSendEmailActivities(deps: SendEmailDeps): SendEmailActivities & SendBatchActivities {
  const { orm, mailer, clock, log, secrets, returnPaths, links } = deps;
  const gate = new SendGate(deps.sendSlots ?? 16);

  /** Test mode: the outcome table instead of SMTP. */
  function simulate(out: Outcomes, email: PassEmail, recipients: PassRecipient[]): void {
    for (const r of recipients) {
      const outcome = testModeOutcome(r.address);
      for (const e of outcome.events) out.event(email, e.type, r.address, { bounceType: e.bounceType ?? null });
      r.tried += 1;
      out.set(r, outcome.state);
    }
  }

  /**
   * Hands one message to the relay. `recipients` are the ones due now, already committed
   * `in_flight`; `dropped` the addresses suppressed at acceptance, which no header names. Records
   * each recipient's outcome in `out` and throws what should be retried, after recording what
   * earlier transactions settled.
   */
  async function sendLive(out: Outcomes, email: PassEmail, recipients: PassRecipient[], dropped: Set<string>, ctx: Context): Promise<void> {
    const identity = ctx.identities.get(email.domain_id) ?? {};
    if (identity.error !== undefined) throw identity.error;
    const parts = personalParts(email, identity.trackingHost ?? null, recipients, identity.sender ?? null);
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
      attachments: (ctx.attachments.get(email.id) ?? []).map((a) => ({
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
        out.event(email, 'sent', r.address);
        if (mailer.finalDestination) out.event(email, 'delivered', r.address);
        out.set(r, mailer.finalDestination ? 'delivered' : 'sent');
      } else if (rej && rej.code !== null && rej.code >= 500) {
        out.event(email, 'bounced', r.address, { bounceType: 'hard', detail: rej.response.slice(0, 1000) });
        out.set(r, 'bounced');
        // A hard bounce at send time: the address goes on the list and its contact becomes `bounced`.
        out.suppress.push({ organizationId: email.organization_id, address: r.address, emailId: email.id });
      } else {
        out.set(r, 'pending');
        retryLater += 1;
      }
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
   * Everything live messages need besides their rows, one query per kind for the whole pass:
   * attachments (only of messages that have some), and each sender domain's identity (its DKIM
   * key opened once per domain, return-path and tracking hosts, its organization's postal address).
   */
  async function liveContext(live: Message[]): Promise<Context> {
    const ctx: Context = { attachments: new Map(), identities: new Map() };
    const [attachments, domains] = await Promise.all([
      readPassAttachments(
        orm,
        live.filter((m) => m.email.has_attachments).map((m) => m.email.id),
      ),
      readPassDomains(orm, [...new Set(live.map((m) => m.email.domain_id))]),
    ]);
    for (const a of attachments) ctx.attachments.set(a.email_id, [...(ctx.attachments.get(a.email_id) ?? []), a]);
    for (const d of domains) {
      try {
        ctx.identities.set(d.id, {
          ...(d.dkim_selector && d.dkim_private_key_enc && secrets
            ? { dkim: { domainName: d.name, keySelector: d.dkim_selector, privateKey: secrets.decrypt(d.dkim_private_key_enc) } }
            : {}),
          ...(d.return_path_host ? { returnPathHost: d.return_path_host } : {}),
          ...(d.tracking_host ? { trackingHost: d.tracking_host } : {}),
          sender: d.postal_address ? { name: d.organization_name, postalAddress: d.postal_address } : null,
        });
      } catch (error) {
        ctx.identities.set(d.id, { error });
      }
    }
    return ctx;
  }

  /**
   * Reads messages for a pass: each one missing or already final is answered at once; the others
   * come back open, in the order asked.
   */
  async function readOpen(emailIds: string[]): Promise<{ open: PassEmail[]; done: Delivered[] }> {
    const byId = new Map((await readPassEmails(orm, emailIds)).map((e) => [e.id, e]));
    const done: Delivered[] = [];
    const open: PassEmail[] = [];
    for (const id of emailIds) {
      const email = byId.get(id);
      if (!email) done.push({ id, status: 'failed', error: new PermanentFailure(`email ${id} does not exist`) });
      else if (FINAL_STATUSES.has(email.status)) done.push({ id, status: email.status });
      else open.push(email);
    }
    return { open, done };
  }

  /** The open messages of a pass that are `sending` (claimed); any other is answered at once. */
  async function readClaimed(emailIds: string[]): Promise<{ active: Message[]; done: Delivered[] }> {
    const { open, done } = await readOpen(emailIds);
    const active: Message[] = [];
    for (const email of open) {
      if (email.status === 'sending') active.push(messageOf(email));
      else
        done.push({
          id: email.id,
          status: email.status,
          error: new PermanentFailure(`email ${email.id} is ${email.status}, not claimed for delivery`),
        });
    }
    return { active, done };
  }

  /**
   * One delivery pass over claimed messages, the same code for a SendEmail run (one message) and
   * a SendBatch run (a chunk): rows read in a few statements for all of them, the live ones'
   * recipients committed `in_flight` together before any SMTP transaction, every live message
   * handed to the relay at once (the gate and the mailer's pool bound the connections), then
   * every outcome (recipient states, events, message statuses) written by one statement, after
   * the hard bounces' suppressions (db/sql/suppress-address.ts). A message whose pass was
   * interrupted keeps its status (`sending`) and comes back with the error to retry on.
   */
  async function deliverMany(emailIds: string[]): Promise<Delivered[]> {
    const { active, done } = await readClaimed(emailIds);
    if (active.length === 0) return done;
    const out = new Outcomes();
    const due = (m: Message) => m.recipients.filter(isDue);
    const live = active.filter((m) => m.email.mode === 'live' && due(m).length > 0);
    for (const m of active) if (m.email.mode === 'test') simulate(out, m.email, due(m));
    const errors = new Map<string, unknown>();
    if (live.length > 0) {
      // Commit "in flight" before talking SMTP: a retry then knows these may have been handed over.
      const inFlight = new Map(live.map((m) => [m.email.id, due(m)]));
      await markInFlight(
        orm,
        [...inFlight.values()].flat().map((r) => r.id),
        clock.now(),
      );
      for (const rs of inFlight.values()) for (const r of rs) r.state = 'in_flight';
      const ctx = await liveContext(live);
      await Promise.all(
        live.map(async (m) => {
          const dropped = new Set(m.recipients.filter((r) => r.state === 'suppressed').map((r) => r.address));
          try {
            await sendLive(out, m.email, inFlight.get(m.email.id) ?? [], dropped, ctx);
          } catch (err) {
            errors.set(m.email.id, err);
          }
        }),
      );
    }
    const results: Delivered[] = active.map((m) => {
      const error = errors.get(m.email.id);
      return error === undefined ? { id: m.email.id, status: out.finish(m) } : { id: m.email.id, status: m.email.status, error };
    });
    await out.write(orm, clock.now());
    for (const [i, r] of results.entries()) {
      if (r.error === undefined) log.info({ emailId: r.id, status: r.status, mode: active[i].email.mode }, 'delivery finished');
    }
    return [...done, ...results];
  }

  /**
   * Records messages failed for good: each one's recipients still due become `failed` with the
   * reason, in one statement for all of them. A message already final keeps its status.
   */
  async function failMany(items: { id: string; detail: string }[]): Promise<Delivered[]> {
    const detailOf = new Map(items.map((i) => [i.id, i.detail]));
    const { open, done } = await readOpen(items.map((i) => i.id));
    const out = new Outcomes();
    const failed = open.map((email): Delivered => {
      const m = messageOf(email);
      for (const r of m.recipients.filter(isDue)) {
        out.set(r, 'failed');
        out.event(email, 'failed', r.address, { detail: detailOf.get(email.id) });
      }
      return { id: email.id, status: out.finish(m) };
    });
    await out.write(orm, clock.now());
    for (const r of failed) log.warn({ emailId: r.id, detail: detailOf.get(r.id), status: r.status }, 'delivery failed');
    return [...done, ...failed];
  }

  return {
    async loadForSend(emailId) {
      const em = orm.em.fork();
      const email = await em.findOne(Email, { id: emailId }, { fields: ['status', 'scheduledAt'] });
      if (!email) throw new PermanentFailure(`email ${emailId} does not exist`);
      return { status: email.status, scheduledAtMs: email.scheduledAt ? email.scheduledAt.getTime() : null };
    },

    async handBack(emailId) {
      const status = await handBackScheduled(orm.em.fork(), emailId);
      if (status === null) throw new PermanentFailure(`email ${emailId} does not exist`);
      return { status };
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

    async failDelivery(emailId, detail) {
      const [r] = await failMany([{ id: emailId, detail }]);
      if (r.error !== undefined) throw r.error;
      return { status: r.status };
    },

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
      // A message gone meanwhile has nothing left to fail.
      await failMany(items);
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

/** A read message with its recipients as the pass changes them. */
function messageOf(email: PassEmail): Message {
  return { email, recipients: email.recipients.map(([id, address, state]) => ({ id, address, state, tried: 0 })) };
}

const isDue = (r: { state: RecipientState }) => r.state === 'pending' || r.state === 'in_flight';

/** A stored address as the one mailbox it was accepted as; anything else cannot be sent. */
function mailbox(stored: string): Mailbox {
  const m = parseMailbox(stored);
  if (!m) throw new PermanentFailure('a stored address is not a single mailbox');
  return m;
}
