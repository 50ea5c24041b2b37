import { Migration } from '@mikro-orm/migrations';

/**
 * MTA-STS hosting for return-path hosts (issue 41).
 * - mta_sts_hosting: one row per return-path host whose MX is the inbound listener (keyed by host:
 *   two organizations with the same domain name share one host, and a host serves one policy).
 *   `mx` is the MX the current `policy_id` was issued for: a change of it or of `mode` issues a new
 *   id (RFC 8461 §3.1). `report_token` names the host in its TLS-RPT `rua=` URL.
 * - tls_rpt_reports: each TLS-RPT report received (RFC 8460), once per reporter and report id (a
 *   sender retrying a post adds nothing), with the session counts of that host's policy.
 */
export class Migration20261213000000_mta_sts_hosting extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table mta_sts_hosting (
      host text primary key,
      mode text not null default 'testing' check (mode in ('testing', 'enforce')),
      mx text not null,
      policy_id text not null check (policy_id ~ '^[A-Za-z0-9]{1,32}$'),
      report_token text not null unique,
      changed_at timestamptz not null,
      created_at timestamptz not null default now()
    );`);
    this.addSql(`create table tls_rpt_reports (
      host text not null references mta_sts_hosting (host) on delete cascade,
      reporter text not null,
      report_id text not null,
      day date not null,
      successes bigint not null check (successes >= 0),
      failures bigint not null check (failures >= 0),
      received_at timestamptz not null,
      primary key (host, reporter, report_id)
    );`);
    this.addSql(`create index tls_rpt_reports_day_idx on tls_rpt_reports (host, day);`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table tls_rpt_reports;`);
    this.addSql(`drop table mta_sts_hosting;`);
  }
}
