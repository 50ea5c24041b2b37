import { Migration } from '@mikro-orm/migrations';

/**
 * Broadcasts (issue 18): one message to every eligible member of a segment.
 * - broadcasts: the request as accepted, its state and its fan-out cursor (`enqueued`: recipients
 *   at positions below it went through the accept path). `started_at` null with `status` queued
 *   is the outbox: the dispatcher starts a BroadcastFanOut run for each such row.
 * - broadcast_recipients: the audience frozen at start, numbered from 0 in contact order, so each
 *   page is a range and a resumed run continues where the cursor says.
 * - emails.broadcast_id: each message of a broadcast, for progress and cancel.
 */
export class Migration20261202000000_broadcasts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table broadcasts (
        id uuid primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        api_key_id uuid not null,
        segment_id uuid not null,
        name text,
        from_address text not null,
        domain_id uuid not null,
        topic_id uuid,
        kind text not null,
        subject text,
        html text,
        text text,
        template_id uuid,
        template_version integer,
        scheduled_at timestamptz,
        status text not null check (status in ('queued', 'sending', 'sent', 'canceled', 'failed')),
        recipients integer,
        enqueued integer not null default 0,
        render_failures integer not null default 0,
        failure text,
        enqueued_at timestamptz,
        started_at timestamptz,
        fanned_out_at timestamptz,
        finished_at timestamptz,
        canceled_at timestamptz,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );`);
    this.addSql(`create index broadcasts_org_idx on broadcasts (organization_id, created_at desc, id desc);`);
    this.addSql(`create index broadcasts_outbox_idx on broadcasts (created_at) where enqueued_at is null;`);
    this.addSql(`
      create table broadcast_recipients (
        broadcast_id uuid not null references broadcasts(id) on delete cascade,
        position integer not null,
        contact_id uuid not null,
        email text collate "C" not null,
        primary key (broadcast_id, position)
      );`);
    this.addSql(`alter table emails add column broadcast_id uuid;`);
    this.addSql(`create index emails_broadcast_idx on emails (broadcast_id, status) where broadcast_id is not null;`);
    this.addSql(`alter table emails drop constraint if exists emails_source_check;`);
    this.addSql(`alter table emails add constraint emails_source_check check (source in ('api', 'smtp', 'broadcast'));`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table emails drop constraint if exists emails_source_check;`);
    this.addSql(`alter table emails add constraint emails_source_check check (source in ('api', 'smtp'));`);
    this.addSql(`drop index emails_broadcast_idx;`);
    this.addSql(`alter table emails drop column broadcast_id;`);
    this.addSql(`drop table broadcast_recipients;`);
    this.addSql(`drop table broadcasts;`);
  }
}
