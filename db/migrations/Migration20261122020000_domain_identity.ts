import { Migration } from '@mikro-orm/migrations';

/** Sending identity per domain: DKIM key pair (private key encrypted), DNS records, verification state, soft delete. */
export class Migration20261122020000_domain_identity extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table domains
        add column dns_provider text not null default 'manual',
        add column dkim_selector text,
        add column dkim_public_key text,
        add column dkim_private_key_enc text,
        add column return_path_host text,
        add column records jsonb not null default '[]',
        add column verification_generation integer not null default 0,
        add column verifying_until timestamptz,
        add column last_checked_at timestamptz,
        add column verified_at timestamptz,
        add column deleted_at timestamptz;`);
    // A deleted domain keeps its row (its mail still points at it) but frees its name.
    this.addSql(`alter table domains drop constraint domains_organization_id_name_key;`);
    this.addSql(`create unique index domains_org_name_live_idx on domains (organization_id, name) where deleted_at is null;`);
  }

  override async down(): Promise<void> {
    this.addSql('drop index domains_org_name_live_idx;');
    this.addSql('alter table domains add constraint domains_organization_id_name_key unique (organization_id, name);');
    this
      .addSql(`alter table domains drop column dns_provider, drop column dkim_selector, drop column dkim_public_key, drop column dkim_private_key_enc,
      drop column return_path_host, drop column records, drop column verification_generation, drop column verifying_until,
      drop column last_checked_at, drop column verified_at, drop column deleted_at;`);
  }
}
