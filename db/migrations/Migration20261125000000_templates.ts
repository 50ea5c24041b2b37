import { Migration } from '@mikro-orm/migrations';

/**
 * Templates (issue 12):
 * - templates: the template and its draft. `slug` is optional and unique per organization.
 *   `latest_version` is bumped by the publish statement itself, so concurrent publishes get 1, 2, …
 *   in turn (the row lock orders them) and no number is used twice.
 * - template_versions: published versions, immutable; (template_id, version) unique. They go with
 *   their template when it is deleted.
 * - emails.template_id, template_version: what a message was rendered from. No foreign key: a
 *   stored message outlives its template.
 */
export class Migration20261125000000_templates extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table templates (
        id uuid primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        name text not null,
        slug text collate "C",
        subject text not null,
        html text,
        text text,
        variables jsonb not null default '[]',
        draft_revision int not null default 0,
        latest_version int not null default 0,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );`);
    this.addSql(`create unique index templates_slug_idx on templates (organization_id, slug) where slug is not null;`);
    this.addSql(`create index templates_created_idx on templates (organization_id, created_at desc, id desc);`);
    this.addSql(`
      create table template_versions (
        id uuid primary key,
        template_id uuid not null references templates(id) on delete cascade,
        version int not null check (version > 0),
        subject text not null,
        html text,
        text text,
        variables jsonb not null,
        published_at timestamptz not null
      );`);
    this.addSql(`create unique index template_versions_number_idx on template_versions (template_id, version);`);
    this.addSql(`alter table emails add column template_id uuid, add column template_version int;`);
  }

  override async down(): Promise<void> {
    this.addSql('alter table emails drop column if exists template_id, drop column if exists template_version;');
    this.addSql('drop table if exists template_versions;');
    this.addSql('drop table if exists templates;');
  }
}
