import { Migration } from '@mikro-orm/migrations';

/** The send pipeline: organizations, domains, keys, emails with recipients, events, attachments, suppressions. */
export class Migration20261122000000_initial extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table organizations (
        id uuid primary key,
        name text not null,
        plan text not null default 'free' check (plan in ('free', 'standard')),
        postal_address text,
        created_at timestamptz not null default now()
      );`);
    this.addSql(`
      create table domains (
        id uuid primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        name text not null,
        stream text not null default 'transactional' check (stream in ('transactional', 'bulk')),
        status text not null default 'pending' check (status in ('pending', 'verified')),
        created_at timestamptz not null default now(),
        unique (organization_id, name)
      );`);
    this.addSql(`
      create table api_keys (
        id uuid primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        name text not null,
        permission text not null check (permission in ('send', 'full', 'admin')),
        mode text not null check (mode in ('live', 'test')),
        token_hash text not null unique,
        token_prefix text not null,
        domain_ids jsonb,
        rate_limit integer check (rate_limit between 1 and 1000),
        created_at timestamptz not null default now(),
        revoked_at timestamptz
      );`);
    this.addSql(`create index api_keys_org_idx on api_keys (organization_id);`);
    this.addSql(`
      create table emails (
        id uuid primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        api_key_id uuid not null references api_keys(id),
        domain_id uuid not null references domains(id),
        from_address text not null,
        to_addresses jsonb not null,
        cc_addresses jsonb not null default '[]',
        bcc_addresses jsonb not null default '[]',
        reply_to text,
        subject text not null,
        html text,
        text text,
        headers jsonb not null default '{}',
        tags jsonb not null default '[]',
        kind text,
        mode text not null check (mode in ('live', 'test')),
        status text not null,
        scheduled_at timestamptz,
        message_id text not null,
        idempotency_key text,
        enqueued_at timestamptz,
        sent_at timestamptz,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );`);
    // Keyset pagination walks this index newest first; filters are applied on top of it.
    this.addSql(`create index emails_org_created_idx on emails (organization_id, created_at desc, id desc);`);
    this.addSql(`create index emails_org_domain_created_idx on emails (organization_id, domain_id, created_at desc, id desc);`);
    this.addSql(
      `create unique index emails_org_idempotency_key_uq on emails (organization_id, idempotency_key) where idempotency_key is not null;`,
    );
    // Recovery sweep: accepted messages whose workflow was never started.
    this.addSql(`create index emails_not_enqueued_idx on emails (created_at) where enqueued_at is null;`);
    this.addSql(`
      create table recipients (
        id uuid primary key,
        email_id uuid not null references emails(id) on delete cascade deferrable initially deferred,
        address text not null,
        field text not null check (field in ('to', 'cc', 'bcc')),
        state text not null default 'pending',
        attempts integer not null default 0,
        updated_at timestamptz not null default now(),
        unique (email_id, address)
      );`);
    this.addSql(`create index recipients_address_idx on recipients (address, email_id);`);
    this.addSql(`
      create table email_events (
        id bigserial primary key,
        email_id uuid not null references emails(id) on delete cascade deferrable initially deferred,
        organization_id uuid not null,
        type text not null,
        recipient text not null,
        at timestamptz not null default now(),
        bounce_type text check (bounce_type in ('hard', 'soft', 'undetermined')),
        detail text,
        url text
      );`);
    this.addSql(`create index email_events_email_idx on email_events (email_id, id);`);
    this.addSql(`
      create table attachments (
        id uuid primary key,
        email_id uuid not null references emails(id) on delete cascade deferrable initially deferred,
        position integer not null,
        filename text not null,
        content_type text not null,
        size integer not null,
        content bytea not null
      );`);
    this.addSql(`create index attachments_email_idx on attachments (email_id, position);`);
    this.addSql(`
      create table suppressions (
        id uuid primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        email text not null,
        reason text not null,
        source_email_id uuid,
        created_at timestamptz not null default now(),
        unique (organization_id, email)
      );`);
  }

  override async down(): Promise<void> {
    for (const t of ['suppressions', 'attachments', 'email_events', 'recipients', 'emails', 'api_keys', 'domains', 'organizations']) {
      this.addSql(`drop table if exists ${t} cascade;`);
    }
  }
}
