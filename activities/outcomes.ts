import type { RecipientState } from '../db/entities/recipient';
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
