import type { RecipientState } from '../db/entities/recipient';
import type { EmailStatus } from '../db/entities/email';
import type { EventType } from '../db/entities/email-event';

/** Test mode: the spec's outcome table, decided by the local part (a `+label` and the domain ignored). */
export function testModeOutcome(address: string): { events: { type: EventType; bounceType?: 'hard' }[]; state: RecipientState } {
  const local = address.toLowerCase().split('@')[0].split('+')[0];
  switch (local) {
    case 'bounce':
      return { events: [{ type: 'sent' }, { type: 'bounced', bounceType: 'hard' }], state: 'bounced' };
    case 'complaint':
      return { events: [{ type: 'sent' }, { type: 'delivered' }, { type: 'complained' }], state: 'complained' };
    case 'suppressionlist':
      return { events: [{ type: 'sent' }, { type: 'rejected' }], state: 'rejected' };
    default:
      return { events: [{ type: 'sent' }, { type: 'delivered' }], state: 'delivered' };
  }
}

/**
 * A message's status from its recipients' states: the furthest any recipient got, so one bounced
 * cc does not hide that the main recipient received it. Documented in docs/api.md.
 */
const PRECEDENCE: [RecipientState, EmailStatus][] = [
  ['complained', 'complained'],
  ['delivered', 'delivered'],
  ['sent', 'sent'],
  ['bounced', 'bounced'],
  ['rejected', 'suppressed'],
  ['failed', 'failed'],
];

export function aggregateStatus(states: RecipientState[]): EmailStatus {
  const live: RecipientState[] = states.filter((s) => s !== 'suppressed');
  if (live.length === 0) return 'suppressed';
  if (live.some((s) => s === 'pending' || s === 'in_flight')) return 'sending';
  for (const [state, status] of PRECEDENCE) if (live.includes(state)) return status;
  return 'failed';
}
