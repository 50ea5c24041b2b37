import { Migration } from '@mikro-orm/migrations';

/**
 * Bulk mail for recipients (issue 16): a domain's tracking host (its CNAME record lives in
 * `records` with purpose `tracking`), and each message's tracking choice and topic (the topic
 * its unsubscribe link leaves). A recipient's `unsubscribed` event is recorded once per message
 * however often its link is used: a unique index decides, not a read before the write.
 */
export class Migration20261201000000_bulk_recipients extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table domains add column tracking_host text null;`);
    this.addSql(
      `alter table emails add column track_opens boolean not null default false, add column track_clicks boolean not null default false, add column topic_id uuid null;`,
    );
    this.addSql(`create unique index email_events_unsubscribed_once on email_events (email_id, recipient) where type = 'unsubscribed';`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index email_events_unsubscribed_once;`);
    this.addSql(`alter table emails drop column track_opens, drop column track_clicks, drop column topic_id;`);
    this.addSql(`alter table domains drop column tracking_host;`);
  }
}
