import type { RecipientState } from '../../db/entities/recipient';
import { EMAIL_STATUSES, type EmailStatus } from '../../db/entities/email';

/**
 * A message's status (the API's `last_event`; spec, Email status). The list is declared beside
 * its column (db/entities/email.ts: db/ cannot import core/) and exported here, with the rules
 * over it, for everything above db/: the API's list filter, the bounce handler, delivery.
 */
export { EMAIL_STATUSES, type EmailStatus };

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
