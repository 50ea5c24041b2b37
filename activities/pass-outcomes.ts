import type { Orm } from '../db/orm';
import type { EmailStatus, EventType, RecipientState } from '../db/entities';
import { recordPassOutcomes, type PassEmail, type PassOutcomes } from '../db/sql/delivery-pass';
import { suppressAddress } from '../db/sql/suppress-address';
import { aggregateStatus } from '../core/emails/status';
import { nextAttempt } from '../core/delivery/backoff';

const SENT_STATUSES = new Set(['sent', 'delivered', 'bounced', 'complained']);
/** RETRY_MAX_AGE_HOURS' default: 4 days, as MTAs keep mail they cannot hand over yet. */
export const DEFAULT_MAX_AGE_MS = 96 * 3_600_000;

/** How long deferred mail is tried again before it fails (RETRY_MAX_AGE_HOURS). */
export interface RetryRule {
  maxAgeMs: number;
}

/** A recipient during a pass; `tried` counts an attempt the in_flight statement did not (test mode). */
export interface PassRecipient {
  id: string;
  address: string;
  state: RecipientState;
  tried: number;
}

/** A claimed message during a pass, with all its recipients (the due ones and those dropped at acceptance). */
export interface Message {
  email: PassEmail;
  recipients: PassRecipient[];
}

/** A read message with its recipients as the pass changes them. */
export function messageOf(email: PassEmail): Message {
  return { email, recipients: email.recipients.map(([id, address, state]) => ({ id, address, state, tried: 0 })) };
}

/** A recipient still to be handed over: never tried, or tried without an answer. */
export const isDue = (r: { state: RecipientState }) => r.state === 'pending' || r.state === 'in_flight';

/**
 * What a pass settles, of one message or several: written as it is settled (each live message's
 * outcome when the relay answers it) by the process's group commit, or by a statement of its own.
 */
export class Outcomes {
  readonly changed = new Set<PassRecipient>();
  readonly events: PassOutcomes['events'] = [];
  readonly emails: PassOutcomes['emails'] = [];
  /** Hard bounces at send time: the address goes on the list and its contact becomes `bounced`. */
  readonly suppress: { organizationId: string; address: string; emailId: string }[] = [];
  /** Messages an MX refused for now (direct delivery), by id: the last reply, and the site's suspension if any. */
  readonly deferred = new Map<string, { reply: string; suspendedUntil: Date | null }>();

  constructor(private readonly retry: RetryRule = { maxAgeMs: DEFAULT_MAX_AGE_MS }) {}

  /** A recipient an MX refused for now: `delivery_delayed` with the reply; it stays due for the next attempt. */
  defer(email: PassEmail, r: PassRecipient, reply: string, suspendedUntil: Date | null): void {
    this.event(email, 'delivery_delayed', r.address, { detail: reply.slice(0, 1000) });
    this.set(r, 'pending');
    const was = this.deferred.get(email.id);
    const until = [was?.suspendedUntil, suspendedUntil].filter((d): d is Date => !!d).sort((a, b) => b.getTime() - a.getTime())[0];
    this.deferred.set(email.id, { reply: reply.slice(0, 1000), suspendedUntil: until ?? null });
  }

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

  /**
   * The message's status from its recipients, already updated; returned and written with the rest.
   * A message with recipients deferred goes back to `queued` until its next attempt (the backoff,
   * or the end of its site's suspension), or, past the maximum age, they fail.
   */
  finish(m: Message, now: Date = new Date()): EmailStatus {
    const d = this.deferred.get(m.email.id);
    if (d && m.recipients.some(isDue)) {
      const next = nextAttempt({
        deferrals: m.email.deferrals,
        now,
        since: new Date(m.email.scheduled_at ?? m.email.created_at),
        maxAgeMs: this.retry.maxAgeMs,
        ...(d.suspendedUntil ? { notBefore: d.suspendedUntil } : {}),
      });
      if ('retryAt' in next) {
        const reason = d.suspendedUntil && d.suspendedUntil >= next.retryAt ? 'site_suspended' : 'deferred';
        this.emails.push({ id: m.email.id, status: 'queued', sent: false, retry: { reason, at: next.retryAt, reply: d.reply } });
        return 'queued';
      }
      const hours = Math.round(this.retry.maxAgeMs / 3_600_000);
      for (const r of m.recipients.filter(isDue)) {
        this.set(r, 'failed');
        this.event(m.email, 'failed', r.address, {
          detail: `gave up after ${hours} h of deferrals; last reply: ${d.reply}`.slice(0, 1000),
        });
      }
    }
    const status = aggregateStatus(m.recipients.map((r) => r.state));
    this.emails.push({ id: m.email.id, status, sent: SENT_STATUSES.has(status) });
    return status;
  }

  /**
   * Writes what was settled since the last write: the hard bounces' suppressions first, then the
   * recipient states, events and message statuses through `record` (the process's group commit,
   * activities/outcome-commit.ts), or by a statement of their own.
   */
  async write(orm: Orm, at: Date, record: (o: PassOutcomes) => Promise<void> = (o) => recordPassOutcomes(orm, o)): Promise<void> {
    const suppress = this.suppress.splice(0);
    const outcomes: PassOutcomes = {
      at,
      recipients: [...this.changed].map((r) => ({ id: r.id, state: r.state, tried: r.tried })),
      events: this.events.splice(0),
      emails: this.emails.splice(0),
    };
    this.changed.clear();
    // Listed before the outcome commits: a crash in between sends again to a listed address
    // (bounced again), never records a bounce whose address is not listed.
    for (const s of suppress) {
      await suppressAddress(orm.em.fork(), { ...s, reason: 'bounce', bounceContact: true });
    }
    await record(outcomes);
  }
}
