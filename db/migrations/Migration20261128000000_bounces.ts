import { Migration } from '@mikro-orm/migrations';

/**
 * Bounces, complaints and the suppression list (issue 14).
 * - suppressions.reason is `bounce`, `complaint` or `manual` (the API's names; `hard_bounce` rows
 *   written before are renamed). The list filters by reason and by address, newest first.
 * - inbound_messages: every message the inbound listener accepted, stored before the SMTP reply
 *   (the raw bytes, the envelope). A row with `processed_at` null is work for the processor,
 *   which claims it with FOR UPDATE SKIP LOCKED, applies it and stamps it in one transaction, so
 *   a message is applied once even across crashes and several processes. `outcome` says what it
 *   was (bounced, delivery_delayed, complained, auto_reply, forged, unmatched, test_mail).
 * - domains.return_path_host is looked up by the listener for every RCPT.
 * - emails_sent_idx: `svc email unconfirmed` walks `sent` messages by age; the partial index holds
 *   only messages at `sent`, so it stays small and costs nothing to the other states.
 */
export class Migration20261128000000_bounces extends Migration {
  override async up(): Promise<void> {
    this.addSql(`update suppressions set reason = 'bounce' where reason = 'hard_bounce';`);
    this.addSql(`alter table suppressions add constraint suppressions_reason_check check (reason in ('bounce', 'complaint', 'manual'));`);
    this.addSql(`create index suppressions_list_idx on suppressions (organization_id, created_at desc, id desc);`);
    this.addSql(`create index domains_return_path_host_idx on domains (return_path_host) where deleted_at is null;`);
    this.addSql(`
      create table inbound_messages (
        id uuid primary key default svc_uuidv7(),
        received_at timestamptz not null default now(),
        remote_address text,
        mail_from text,
        rcpt_to text[] not null,
        size integer not null,
        raw bytea not null,
        processed_at timestamptz,
        outcome text,
        email_id uuid,
        recipient_id uuid
      );`);
    this.addSql(`create index emails_sent_idx on emails (sent_at, id) where status = 'sent';`);
    this.addSql(`create index inbound_messages_pending_idx on inbound_messages (received_at, id) where processed_at is null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table inbound_messages;`);
    this.addSql(`drop index emails_sent_idx;`);
    this.addSql(`drop index domains_return_path_host_idx;`);
    this.addSql(`drop index suppressions_list_idx;`);
    this.addSql(`alter table suppressions drop constraint suppressions_reason_check;`);
    this.addSql(`update suppressions set reason = 'hard_bounce' where reason = 'bounce';`);
  }
}
