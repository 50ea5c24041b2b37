import { Migration } from '@mikro-orm/migrations';

/**
 * Webhook first attempts in batches (issue 13): webhook_deliveries.run_attempts counts the
 * attempts of the current run. A delivery the dispatcher claims with run_attempts 0 gets its
 * first attempt in a WebhookFirstAttempts batch; one handed back after a failed first attempt
 * (enqueued_at cleared by the attempt's statement) is continued by a WebhookDelivery run from
 * attempt run_attempts. A batch step run again after a crash skips deliveries with
 * run_attempts > 0. A manual retry or `recover` (the next run) starts it at 0 again.
 */
export class Migration20261130000000_webhook_batches extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table webhook_deliveries add column run_attempts integer not null default 0;`);
    // Runs under way keep their count (their WebhookDelivery run goes on as before).
    this.addSql(
      `update webhook_deliveries set run_attempts = attempts where status = 'pending' and enqueued_at is not null and attempts > 0;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`alter table webhook_deliveries drop column run_attempts;`);
  }
}
