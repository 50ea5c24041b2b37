import { Migration } from '@mikro-orm/migrations';

/** Management plane: key rotation, organization caps, the audit log, per-key rate windows. */
export class Migration20261122010000_management extends Migration {
  override async up(): Promise<void> {
    // Rotation keeps the replaced token valid for 24 h beside the new one.
    this.addSql(
      `alter table api_keys add column previous_token_hash text unique, add column previous_token_expires_at timestamptz, add column rotated_at timestamptz;`,
    );
    this.addSql(
      `alter table organizations add column daily_send_cap integer check (daily_send_cap >= 0), add column updated_at timestamptz not null default now();`,
    );
    this.addSql(`
      create table audit_log (
        id uuid primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        api_key_id uuid references api_keys(id),
        action text not null,
        target_type text not null,
        target_id text not null,
        details jsonb not null default '{}',
        created_at timestamptz not null default now()
      );`);
    this.addSql(`create index audit_log_org_created_idx on audit_log (organization_id, created_at desc, id desc);`);
    // One row per key: the current one-second window and what it has used, shared by every API
    // process. Unlogged: charging it writes no WAL, so it adds no commit flush to every request,
    // and after a crash a lost window only means one second without a count.
    this.addSql(`
      create unlogged table key_rate_windows (
        api_key_id uuid primary key references api_keys(id) on delete cascade,
        window_start timestamptz not null,
        used integer not null
      );`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table key_rate_windows;');
    this.addSql('drop table audit_log;');
    this.addSql('alter table organizations drop column daily_send_cap, drop column updated_at;');
    this.addSql('alter table api_keys drop column previous_token_hash, drop column previous_token_expires_at, drop column rotated_at;');
  }
}
