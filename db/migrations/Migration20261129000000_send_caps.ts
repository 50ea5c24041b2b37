import { Migration } from '@mikro-orm/migrations';

/**
 * Daily send caps, domain warm-up and stream isolation (issue 15).
 * - send_counters: recipients reserved per (scope, scope id, UTC day); the platform's scope id is
 *   the nil uuid. The outbox's reserve statement locks a message's rows platform → organization →
 *   domain and bumps all or none. A domain row keeps the warm-up stage it was counted under, which
 *   the next day's advance rule reads.
 * - emails.stream: the sender domain's stream, copied at acceptance, so the outbox claims each
 *   stream from its own index range (a bulk backlog never sits in front of transactional mail).
 * - emails.reserved_on: the UTC day whose allowances the message took; a retried pass never
 *   takes them twice. emails.waiting_reason/waiting_until: parked behind a cap (still `queued`,
 *   no workflow, no timer) until the release step lets it back into the outbox.
 * - The outbox index leaves parked rows out and orders by due time, so scheduled mail waits in it
 *   (not as engine timers) and is reserved on the day it is due.
 * - domains.warmup_stage (null: warm-up off) and warmup_checked_on (the day the advance rule last
 *   ran: once per domain per day, decided by a conditional update). Domains that exist already
 *   keep sending as before (warm-up off).
 */
export class Migration20261129000000_send_caps extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table send_counters (
        scope text not null check (scope in ('platform', 'organization', 'domain')),
        scope_id uuid not null,
        day date not null,
        used integer not null default 0,
        warmup_stage integer,
        reached_at timestamptz,
        primary key (scope, scope_id, day)
      );`);
    this.addSql(`alter table domains add column warmup_stage integer, add column warmup_checked_on date;`);
    this.addSql(`
      alter table emails
        add column stream text not null default 'transactional',
        add column reserved_on date,
        add column waiting_reason text,
        add column waiting_until timestamptz;`);
    this.addSql(`update emails e set stream = d.stream from domains d where d.id = e.domain_id and d.stream <> 'transactional';`);
    this.addSql(`drop index if exists emails_outbox_idx;`);
    this.addSql(`drop index if exists emails_outbox_scheduled_idx;`);
    this.addSql(`drop index if exists emails_not_enqueued_idx;`);
    this.addSql(
      `create index emails_outbox_idx on emails (mode, stream, (coalesce(scheduled_at, created_at)), id) where enqueued_at is null and waiting_reason is null;`,
    );
    this.addSql(`create index emails_reserved_idx on emails (domain_id, reserved_on) where reserved_on is not null;`);
    this.addSql(`create index emails_parked_idx on emails (domain_id, created_at, id) where waiting_reason is not null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists emails_parked_idx;`);
    this.addSql(`drop index if exists emails_reserved_idx;`);
    this.addSql(`drop index if exists emails_outbox_idx;`);
    this.addSql(`alter table emails drop column stream, drop column reserved_on, drop column waiting_reason, drop column waiting_until;`);
    this.addSql(`alter table domains drop column warmup_stage, drop column warmup_checked_on;`);
    this.addSql(`drop table send_counters;`);
    this.addSql(`create index emails_outbox_idx on emails (mode, created_at, id) where enqueued_at is null;`);
    this.addSql(
      `create index emails_outbox_scheduled_idx on emails (scheduled_at) where enqueued_at is null and scheduled_at is not null;`,
    );
  }
}
