import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { simpleParser } from 'mailparser';
import { Email, Recipient, type RecipientState } from '../../db/entities';
import { persistEvent, type EventType, type NewEvent } from '../../db/sql/email-events';
import { suppressAddress } from '../../db/sql/suppress-address';
import { aggregateStatus, type EmailStatus } from '../emails/status';
import { classifyReturn, type ReturnOutcome } from './classify';
import { verpTokenOf, type ReturnPaths } from './verp';

/** What one returned message turned out to be; stored on its inbound row. */
export type ReturnResult =
  | 'bounced'
  | 'bounced_undetermined'
  | 'delivery_delayed'
  | 'complained'
  /** An auto-reply (vacation, out of office) without a report: ignored. */
  | 'auto_reply'
  /** A DSN saying the message was delivered or relayed: ignored. */
  | 'success_report'
  /** A token whose signature does not match: dropped, never recorded. */
  | 'forged'
  /** No return path of ours in it (e.g. a feedback report that lost the original headers). */
  | 'unmatched'
  /** The recipient already has this outcome (the same report delivered twice). */
  | 'duplicate';

export interface AppliedReturn {
  result: ReturnResult;
  emailId: string | null;
  recipientId: string | null;
}

/** The local part feedback loops are registered with (`complaints@<return-path host>`). */
export const COMPLAINTS_LOCAL_PART = 'complaints';

/** The local part of the DMARC `rua=` (`dmarc-reports@<return-path host>`): reports, never bounces (core/dmarc/ingest.ts). */
export const DMARC_REPORTS_LOCAL_PART = 'dmarc-reports';

/** The return-path host a message was mailed to as a DMARC report, or null: such a message is routed away from applyReturn. */
export function dmarcReportHost(rcptTo: string[]): string | null {
  for (const rcpt of rcptTo) {
    const at = rcpt.lastIndexOf('@');
    if (at > 0 && rcpt.slice(0, at).toLowerCase() === DMARC_REPORTS_LOCAL_PART) return rcpt.slice(at + 1).toLowerCase();
  }
  return null;
}

/**
 * Message statuses a late return may change. `sending` is left to the delivery in progress (its
 * finalize reads the recipient states), `queued`/`canceled`/`failed`/`suppressed` never left us.
 */
const SETTLED = new Set<EmailStatus>(['sent', 'delivered', 'bounced', 'complained', 'unconfirmed']);

/**
 * Applies one message that came back to a bounce or complaint address, on the caller's
 * transaction (which also stamps the inbound row): the event on the message (and so its webhooks),
 * the recipient's state, the message's status, and for a hard bounce or a complaint the
 * suppression list (and a hard bounce's contact status). Docs: docs/operations.md.
 */
export async function applyReturn(
  em: EntityManager,
  returnPaths: ReturnPaths,
  message: { rcptTo: string[]; raw: Buffer },
  now: Date,
): Promise<AppliedReturn> {
  const outcome = await classify(message.raw);
  const none = { emailId: null, recipientId: null };
  if (outcome.kind === 'auto_reply') return { result: 'auto_reply', ...none };
  if (outcome.kind === 'success_report') return { result: 'success_report', ...none };

  const found = recipientOf(returnPaths, message);
  if (found === 'forged') return { result: 'forged', ...none };
  if (found === null) return { result: 'unmatched', ...none };

  // Locked: two reports for one recipient apply one after the other, and the second sees the first.
  const recipient = await em.findOne(Recipient, { id: found.recipientId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  if (!recipient) return { result: 'unmatched', ...none };
  const email = await em.findOneOrFail(Email, { id: recipient.emailId }, { fields: ['organizationId', 'mode', 'status'] });
  const ids = { emailId: email.id, recipientId: recipient.id };
  // Test mail never leaves the service, so nothing can come back for it; never let it near the list.
  if (email.mode !== 'live') return { result: 'unmatched', ...ids };

  const record = (type: EventType, extra: Pick<NewEvent, 'bounceType' | 'detail'>) =>
    persistEvent(em, { emailId: email.id, organizationId: email.organizationId, type, recipient: recipient.address, at: now, ...extra });

  // A hard bounce also sets the contact `bounced`; a complaint lists the address only.
  const suppress = (reason: 'bounce' | 'complaint') =>
    suppressAddress(em, {
      organizationId: email.organizationId,
      address: recipient.address,
      reason,
      emailId: email.id,
      bounceContact: reason === 'bounce',
    });

  let state: RecipientState;
  let result: ReturnResult;
  switch (outcome.kind) {
    case 'delivery_delayed':
      // A delay changes nothing yet: the remote server keeps trying, and a bounce may follow.
      record('delivery_delayed', { detail: outcome.detail });
      await em.flush();
      return { result: 'delivery_delayed', ...ids };
    case 'bounced':
      if (recipient.state === 'bounced') return { result: 'duplicate', ...ids };
      record('bounced', { bounceType: 'hard', detail: outcome.detail });
      await suppress('bounce');
      state = 'bounced';
      result = 'bounced';
      break;
    case 'unreadable':
      // It came back to a VERP address, so it did not arrive, but what went wrong is unknown:
      // recorded, not suppressed (only a hard bounce or a complaint suppresses).
      if (recipient.state === 'bounced') return { result: 'duplicate', ...ids };
      record('bounced', { bounceType: 'undetermined', detail: 'returned message without a readable delivery status report' });
      state = 'bounced';
      result = 'bounced_undetermined';
      break;
    case 'complained':
      if (recipient.state === 'complained') return { result: 'duplicate', ...ids };
      record('complained', { detail: outcome.detail });
      await suppress('complaint');
      state = 'complained';
      result = 'complained';
      break;
  }
  recipient.state = state;
  recipient.updatedAt = now;
  await em.flush();
  if (SETTLED.has(email.status)) {
    const states = await em.find(Recipient, { emailId: email.id }, { fields: ['state'] });
    const status = aggregateStatus(states.map((r) => r.state));
    if (status !== email.status) await em.nativeUpdate(Email, { id: email.id }, { status, updatedAt: now });
  }
  return { result, ...ids };
}

/** The message's meaning; content that breaks a reader is unreadable, never a failed pass retried forever. */
async function classify(raw: Buffer): Promise<ReturnOutcome> {
  try {
    const outcome = classifyReturn(raw);
    if (outcome.kind !== 'unreadable') return outcome;
    // Only the subject is missing for the auto-reply check: decode it (encoded words) and look again.
    const parsed = await simpleParser(raw, { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true });
    return classifyReturn(raw, { subject: parsed.subject ?? '' });
  } catch {
    return { kind: 'unreadable' };
  }
}

/**
 * The recipient a returned message is about. A bounce names it in the address it came to (the
 * VERP return path); a feedback report sent to `complaints@` carries the original message, whose
 * Return-Path (or any header quoting it) holds the token. Every token is checked against its HMAC.
 */
function recipientOf(returnPaths: ReturnPaths, message: { rcptTo: string[]; raw: Buffer }): { recipientId: string } | 'forged' | null {
  let sawToken = false;
  for (const rcpt of message.rcptTo) {
    const token = verpTokenOf(rcpt);
    if (token === null) continue;
    sawToken = true;
    const recipientId = returnPaths.recipientOf(token);
    if (recipientId) return { recipientId };
  }
  if (sawToken) return 'forged';
  // Feedback reports quote the original; look for our return path in the whole text.
  for (const m of message.raw.toString('latin1').matchAll(/bounces\+([a-z2-7]{42})@/gi)) {
    sawToken = true;
    const recipientId = returnPaths.recipientOf(m[1]);
    if (recipientId) return { recipientId };
  }
  return sawToken ? 'forged' : null;
}
