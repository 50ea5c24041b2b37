import { Migration } from '@mikro-orm/migrations';

/**
 * DMARC aggregate reports (RFC 7489 Appendix C) mailed to `dmarc-reports@<return-path host>`
 * (issue 41). One row per report, unique per (domain, reporter, report id) so a report mailed
 * twice is stored once; one row per <record>, its day being the report's begin (UTC). `ours` is
 * decided at ingestion (DKIM d= the domain with one of its selectors), since a selector's key may
 * be revoked later. dmarc_sources holds the operator's verdict on a source, which the ramp's gate reads.
 */
export class Migration20261215000000_dmarc_reports extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table dmarc_reports (
      id uuid primary key,
      domain_id uuid not null references domains (id) on delete cascade,
      reporter text not null,
      report_id text not null,
      begin_at timestamptz not null,
      end_at timestamptz not null,
      received_at timestamptz not null,
      unique (domain_id, reporter, report_id)
    );`);
    this.addSql(`create index dmarc_reports_domain_begin_idx on dmarc_reports (domain_id, begin_at);`);
    this.addSql(`create table dmarc_report_rows (
      id bigserial primary key,
      report_id uuid not null references dmarc_reports (id) on delete cascade,
      source_ip text not null,
      count integer not null check (count >= 0),
      disposition text not null,
      dkim_aligned boolean not null,
      spf_aligned boolean not null,
      header_from text not null,
      dkim_auth jsonb not null default '[]',
      ours boolean not null
    );`);
    this.addSql(`create index dmarc_report_rows_report_idx on dmarc_report_rows (report_id);`);
    this.addSql(`create table dmarc_sources (
      domain_id uuid not null references domains (id) on delete cascade,
      source_ip text not null,
      unauthorized boolean not null default false,
      marked_by text null,
      marked_at timestamptz null,
      primary key (domain_id, source_ip)
    );`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table dmarc_sources;`);
    this.addSql(`drop table dmarc_report_rows;`);
    this.addSql(`drop table dmarc_reports;`);
  }
}
