import { Migration } from '@mikro-orm/migrations';

/**
 * Broadcast fan-out (issue 18), after Migration20261205000000_store_foreign_keys: the two foreign
 * keys left on the rows a broadcast writes per recipient.
 *
 * - broadcast_recipients.broadcast_id. The freeze inserts a broadcast's whole audience in one
 *   statement, inside the transaction that locked that broadcast's row; each of its rows checked
 *   that same locked row again (100,000 of them: the statement took 1.4–1.9 s with the key and
 *   0.5–1.0 s without, measured).
 * - email_events.email_id. Checked at commit for every event: a deferred check per message of the
 *   store statement (about 6% of PostgreSQL's CPU during a fan-out, profiled). Every writer names
 *   a message that exists: the store statement joins each event to the message it inserted in the
 *   same statement; unsubscribe and engagement select the message they record against in theirs;
 *   the delivery pass records events of the messages it read for delivery, and a bounce or
 *   complaint of the message it loaded.
 *
 * Broadcasts and emails are never deleted (a broadcast is canceled; see the previous migration for
 * emails), so no parent disappears afterwards either. Should they ever be, they are deleted
 * explicitly with their rows, in batches.
 */
export class Migration20261206000000_fan_out_foreign_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table broadcast_recipients drop constraint broadcast_recipients_broadcast_id_fkey;`);
    this.addSql(`alter table email_events drop constraint email_events_email_id_fkey;`);
  }

  override async down(): Promise<void> {
    this.addSql(
      `alter table email_events add constraint email_events_email_id_fkey foreign key (email_id) references emails(id) on delete cascade deferrable initially deferred;`,
    );
    this.addSql(
      `alter table broadcast_recipients add constraint broadcast_recipients_broadcast_id_fkey foreign key (broadcast_id) references broadcasts(id) on delete cascade;`,
    );
  }
}
