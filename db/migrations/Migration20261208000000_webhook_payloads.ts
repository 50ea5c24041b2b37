import { Migration } from '@mikro-orm/migrations';
import { createFunction, WEBHOOK_FUNCTIONS } from '../sql/webhook-payloads';

/**
 * Webhook payloads in one module (issue 36): the fan-out's PL/pgSQL functions, first written
 * inline in Migration20261126000000_webhooks, are (re)created from db/sql/webhook-payloads.ts,
 * where a reader of core/webhooks/ finds them. Their bodies are the same as before (the same
 * payloads, byte for byte), so the triggers and the events already stored are untouched, and
 * there is nothing to undo.
 *
 * This migration reads the module when it runs: a later change to the payloads is a new
 * migration that runs WEBHOOK_FUNCTIONS again (test/db/rules-once.test.ts checks that the database
 * holds the module's text).
 */
export class Migration20261208000000_webhook_payloads extends Migration {
  override async up(): Promise<void> {
    for (const f of WEBHOOK_FUNCTIONS) this.addSql(createFunction(f));
  }

  override async down(): Promise<void> {
    // The functions had these bodies before this migration: nothing to undo.
  }
}
