import { Migration } from '@mikro-orm/migrations';

/**
 * Publishing DNS records to Cloudflare (issue 41).
 * - organizations.internal: set by a platform operator; only an internal organization may attach a
 *   Cloudflare token and publish (the service then edits a zone of its own operators, nobody else's).
 * - cloudflare_connections: an organization's API token, sealed with SECRETS_KEY (core/secrets.ts),
 *   never shown again; `token_id` is Cloudflare's id of it (what the audit log names).
 * - dns_publications: what the service last published (or refused to) for each record of a domain,
 *   and whether DNS has answered it since: `pending` until a lookup matches, then `verified`;
 *   `conflict` when a record the service did not create holds the name.
 */
export class Migration20261214000000_cloudflare extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table organizations add column internal boolean not null default false;`);
    this.addSql(`create table cloudflare_connections (
      organization_id uuid primary key references organizations (id) on delete cascade,
      token_enc text not null,
      token_id text not null,
      attached_by text null,
      attached_at timestamptz not null default now()
    );`);
    this.addSql(`create table dns_publications (
      domain_id uuid not null references domains (id) on delete cascade,
      purpose text not null,
      type text not null,
      name text not null,
      content text not null,
      zone_id text null,
      record_id text null,
      state text not null check (state in ('pending', 'verified', 'conflict', 'failed')),
      detail text null,
      published_by text null,
      published_at timestamptz not null,
      verified_at timestamptz null,
      primary key (domain_id, purpose, type, name)
    );`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table dns_publications;`);
    this.addSql(`drop table cloudflare_connections;`);
    this.addSql(`alter table organizations drop column internal;`);
  }
}
