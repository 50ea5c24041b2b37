import { Migration } from '@mikro-orm/migrations';

/**
 * The console's overview (issue 38): delivery, bounce and complaint rates over the last hour, 24
 * hours and 7 days, and the hourly series, per organization (db/sql/console-overview.ts).
 * - emails_live_sent_idx: live mail by sent_at, carrying organization_id and status, so a 7-day
 *   window is an index-only scan (about 70 ms for 230,000 messages in a week of a million) instead
 *   of a heap read per message. Test mail is left out (it never touches metrics), as is mail not
 *   sent yet. A message's status changes are not HOT updates already (emails_sent_idx reads
 *   status), so this index costs one more index entry per status change of sent live mail.
 */
export class Migration20261210000000_console_overview extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create index emails_live_sent_idx on emails (sent_at) include (organization_id, status) where mode = 'live' and sent_at is not null;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop index emails_live_sent_idx;`);
  }
}
