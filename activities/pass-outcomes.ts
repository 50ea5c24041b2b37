import type { Orm } from '../db/orm';
import type { EmailStatus, EventType, RecipientState } from '../db/entities';
import { recordPassOutcomes, type PassEmail, type PassOutcomes } from '../db/sql/delivery-pass';
import { suppressAddress } from '../db/sql/suppress-address';
import { aggregateStatus } from '../core/emails/status';

const SENT_STATUSES = new Set(['sent', 'delivered', 'bounced', 'complained']);

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

/** What a pass settles, written by one statement at its end (db/sql/delivery-pass.ts). */
export class Outcomes {
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
