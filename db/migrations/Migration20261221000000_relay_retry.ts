import { Migration } from '@mikro-orm/migrations';

/**
 * A message the relay refused for now (a 4xx, a refused or dropped connection) waits `sending` for
 * its run's next attempt (issue 51: it showed nothing while it waited). emails.relay_refusals
 * counts the refusals, emails.relay_retry_at is when the next attempt is due (null: none left, or
 * not waiting); the reply goes in last_reply as an MX's does. Apart from retry_reason/retry_at,
 * which put direct-delivery mail back in the outbox: this mail stays with its run.
 */
export class Migration20261221000000_relay_retry extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table emails add column relay_refusals int not null default 0, add column relay_retry_at timestamptz null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table emails drop column relay_refusals, drop column relay_retry_at;`);
  }
}
