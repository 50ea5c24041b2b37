import { Migration } from '@mikro-orm/migrations';

/**
 * The outbox now holds the backlog: the dispatcher starts workflows only as fast as the engine's
 * queues drain, so messages can wait here by the thousand. It claims them per mode (each mode has
 * its own queue) in acceptance order, and future scheduled ones separately; these indexes serve
 * exactly those two claims without walking the other mode's rows.
 */
export class Migration20261122030000_outbox_indexes extends Migration {
  override async up(): Promise<void> {
    this.addSql(`drop index if exists emails_not_enqueued_idx;`);
    this.addSql(`create index emails_outbox_idx on emails (mode, created_at, id) where enqueued_at is null;`);
    this.addSql(
      `create index emails_outbox_scheduled_idx on emails (scheduled_at) where enqueued_at is null and scheduled_at is not null;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists emails_outbox_scheduled_idx;`);
    this.addSql(`drop index if exists emails_outbox_idx;`);
    this.addSql(`create index emails_not_enqueued_idx on emails (created_at) where enqueued_at is null;`);
  }
}
