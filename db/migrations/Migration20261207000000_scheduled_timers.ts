import { Migration } from '@mikro-orm/migrations';

/**
 * Scheduled mail on Temporal (issue 35): a message's SendEmail run waits on a durable timer, then
 * hands the message back to the outbox. emails.handed_back_at records that hand-back, so the
 * outbox never starts a second timer run for it, whatever the clocks say (the Temporal server's
 * ahead of the API's, a stray cancel signal ending the wait early): the run under its id has
 * ended, and a second start would be refused. Nullable without a default: no table rewrite.
 */
export class Migration20261207000000_scheduled_timers extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table emails add column handed_back_at timestamptz;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table emails drop column handed_back_at;`);
  }
}
