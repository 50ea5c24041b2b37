import { Migration } from '@mikro-orm/migrations';
import { createFunction, WEBHOOK_FUNCTIONS } from '../sql/webhook-payloads';

/**
 * Message events' webhook `data` gains `sequence` (issue 51): the event row's id, the order
 * GET /emails/:id lists a message's events in, so a receiver can put concurrent or retried
 * deliveries back in cause order. The functions are created again from db/sql/webhook-payloads.ts;
 * payloads already built keep what they were built with.
 */
export class Migration20261219000000_webhook_sequence extends Migration {
  override async up(): Promise<void> {
    for (const f of WEBHOOK_FUNCTIONS) this.addSql(createFunction(f));
  }

  override async down(): Promise<void> {
    // A field more in new payloads: receivers that ignore it lose nothing, so nothing to undo.
  }
}
