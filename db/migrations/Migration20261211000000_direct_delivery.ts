import { Migration } from '@mikro-orm/migrations';

/**
 * Direct delivery to recipients' MX (issue 40).
 * - organizations.transport, domains.transport: relay (SMTP_URL, the default) or direct; a
 *   domain's value, when set, overrides its organization's.
 * - emails.retry_reason/retry_at/last_reply/deferrals: a message a recipient's MX refused for now
 *   waits here (still `queued`, out of the outbox: enqueued_at stays set) until retry_at, when the
 *   release step puts it back in the outbox. Apart from waiting_reason, which the daily caps own.
 * - mta_sts_policies: each recipient domain's MTA-STS policy (RFC 8461) as last fetched.
 * - tls_report_counts: TLS-RPT (RFC 8460) session counts per policy domain and day.
 */
export class Migration20261211000000_direct_delivery extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table organizations add column transport text not null default 'relay' check (transport in ('relay', 'direct'));`);
    this.addSql(`alter table domains add column transport text null check (transport in ('relay', 'direct'));`);
    this.addSql(`alter table emails add column retry_reason text null check (retry_reason in ('deferred', 'site_suspended')),
      add column retry_at timestamptz null, add column last_reply text null, add column deferrals integer not null default 0;`);
    this.addSql(`create index emails_retry_idx on emails (retry_at) where retry_reason is not null;`);
    this.addSql(`create table mta_sts_policies (
      domain text primary key,
      policy_id text null,
      mode text null check (mode in ('enforce', 'testing', 'none')),
      mx text[] not null default '{}',
      max_age integer null,
      fetched_at timestamptz not null,
      expires_at timestamptz not null,
      error text null
    );`);
    this.addSql(`create table tls_report_counts (
      policy_domain text not null,
      day date not null,
      successes integer not null default 0,
      failures integer not null default 0,
      primary key (policy_domain, day)
    );`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table tls_report_counts;`);
    this.addSql(`drop table mta_sts_policies;`);
    this.addSql(`drop index emails_retry_idx;`);
    this.addSql(`alter table emails drop column retry_reason, drop column retry_at, drop column last_reply, drop column deferrals;`);
    this.addSql(`alter table domains drop column transport;`);
    this.addSql(`alter table organizations drop column transport;`);
  }
}
