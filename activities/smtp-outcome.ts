import type { PassEmail } from '../db/sql/delivery-pass';
import { TransientDeliveryError } from './errors';
import { SmtpTransactionError, type RecipientRejection, type SendOutcome } from './mailer';
import type { Outcomes, PassRecipient } from './pass-outcomes';

/** What the relay answered to one message's SMTP transactions, in order. */
export class RelayAnswers {
  readonly accepted: string[] = [];
  readonly rejected: RecipientRejection[] = [];
  /** What stopped the transactions (the connection or the relay failed); null when every one was answered. */
  interrupted: unknown = null;

  /** Another transaction's answers, after these. */
  add(other: RelayAnswers): void {
    this.accepted.push(...other.accepted);
    this.rejected.push(...other.rejected);
    this.interrupted ??= other.interrupted;
  }

  /** A transaction the relay took, for some or all of its recipients. */
  took(outcome: SendOutcome): void {
    this.accepted.push(...outcome.accepted);
    this.rejected.push(...outcome.rejected);
  }

  /** A transaction that threw, sent to `to`. Answers whether the message's other transactions go on. */
  failed(err: unknown, to: string[]): boolean {
    if (err instanceof SmtpTransactionError && err.rejected.length > 0) {
      this.rejected.push(...err.rejected);
    } else if (err instanceof SmtpTransactionError && err.code !== null) {
      // The relay refused the whole transaction (MAIL FROM or DATA): 5xx is a hard bounce for
      // each recipient of it, 4xx a retry for them; the other transactions go on.
      this.rejected.push(...to.map((address) => ({ address, code: err.code, response: err.message })));
    } else {
      // The connection or the relay failed: this and the remaining recipients wait for the retry;
      // what earlier transactions settled is recorded first.
      this.interrupted = err;
      return false;
    }
    return true;
  }
}

/**
 * Records each due recipient's outcome from the relay's answers: taken (`sent`, or `delivered`
 * when the mailer is the final destination), refused with 5xx (a hard bounce: the address goes on
 * the list and its contact becomes `bounced`), or anything else (`pending`, for the retry).
 * Answers how many are to be tried again by the message's run (relayFailure says why).
 */
export function settleRecipients(
  out: Outcomes,
  email: PassEmail,
  recipients: PassRecipient[],
  answers: RelayAnswers,
  mailer: { finalDestination: boolean; defers?: boolean },
): number {
  const { finalDestination } = mailer;
  const acceptedSet = new Set(answers.accepted);
  const rejectedBy = new Map(answers.rejected.map((r) => [r.address, r]));
  let retryLater = 0;
  for (const r of recipients) {
    const rej = rejectedBy.get(r.address);
    if (acceptedSet.has(r.address) && !rej) {
      out.event(email, 'sent', r.address);
      if (finalDestination) out.event(email, 'delivered', r.address);
      out.set(r, finalDestination ? 'delivered' : 'sent');
    } else if (rej && rej.code !== null && rej.code >= 500) {
      // Straight from the recipient's MX, a 5.7.x refusal is of the sender (a blocklisted address,
      // its HELO, its authentication), not of the mailbox: a soft bounce, and the address stays usable.
      const senderRefused = mailer.defers === true && /\b5\.7\.\d{1,3}\b/.test(rej.response);
      out.event(email, 'bounced', r.address, { bounceType: senderRefused ? 'soft' : 'hard', detail: rej.response.slice(0, 1000) });
      out.set(r, 'bounced');
      if (!senderRefused) out.suppress.push({ organizationId: email.organization_id, address: r.address, emailId: email.id });
    } else if (mailer.defers && answers.interrupted === null) {
      // Direct delivery: the message waits in its row for its next attempt (Outcomes.finish).
      out.defer(email, r, rej?.response ?? 'no answer from any MX', rej?.suspendedUntil ?? null);
    } else {
      out.set(r, 'pending');
      retryLater += 1;
    }
  }
  return retryLater;
}

/**
 * What a message's run should retry on, from all its transactions' answers and the recipients
 * settled for a retry: the interruption, or the recipients refused for now; null when none.
 */
export function relayFailure(answers: RelayAnswers, retryLater: number): Error | null {
  const interrupted = answers.interrupted;
  if (interrupted !== null && !(interrupted instanceof SmtpTransactionError))
    return interrupted instanceof Error ? interrupted : new Error(String(interrupted));
  if (interrupted instanceof SmtpTransactionError) {
    return new TransientDeliveryError(`SMTP ${interrupted.code ?? 'connection'} error: ${interrupted.message}`);
  }
  if (retryLater > 0) {
    return new TransientDeliveryError(
      `${retryLater} recipient(s) temporarily refused: ${answers.rejected
        .map((r) => r.response)
        .join('; ')
        .slice(0, 500)}`,
    );
  }
  return null;
}
