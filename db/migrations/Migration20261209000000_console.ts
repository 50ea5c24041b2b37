import { Migration } from '@mikro-orm/migrations';

/**
 * The operator console's accounts (issue 38): people who sign in to the web console, not API keys.
 * - operators: one per email (stored lower-case, so the unique index is case-blind). No
 *   organization: a platform operator; else an administrator of that organization (gone with it).
 *   password_hash is null until the operator sets one through a one-time link; totp_secret is
 *   sealed with SECRETS_KEY (core/secrets.ts), pending until totp_enabled; totp_last_step is the
 *   time step of the last code accepted, so a code is good once (RFC 6238, 5.2).
 * - operator_links: one-time set-password links, found by the SHA-256 of their token.
 * - operator_sessions: found by the SHA-256 of the cookie's token; expires_at is the absolute end,
 *   last_seen_at the idle clock; revoked_at ends a session at once (sign-out, password change).
 * - console_signin_failures: sign-in attempts per key (`account:<email>`, `address:<ip>`) and
 *   15-minute window, counted in SQL so every process sharing the database applies one limit.
 * - audit_log.actor: who acted when no key did (`console:<email>`); nullable, no table rewrite.
 */
export class Migration20261209000000_console extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table operators (
        id uuid primary key default svc_uuidv7(),
        email text not null unique check (email = lower(email)),
        organization_id uuid references organizations(id) on delete cascade,
        password_hash text,
        password_changed_at timestamptz,
        totp_secret text,
        totp_enabled boolean not null default false,
        totp_last_step bigint,
        created_at timestamptz not null default now()
      );`);
    this.addSql(`create index operators_organization_idx on operators (organization_id) where organization_id is not null;`);
    this.addSql(`
      create table operator_links (
        token_hash text primary key,
        operator_id uuid not null references operators(id) on delete cascade,
        expires_at timestamptz not null,
        used_at timestamptz,
        created_at timestamptz not null default now()
      );`);
    this.addSql(`create index operator_links_operator_idx on operator_links (operator_id);`);
    this.addSql(`
      create table operator_sessions (
        id_hash text primary key,
        operator_id uuid not null references operators(id) on delete cascade,
        csrf_token text not null,
        created_at timestamptz not null default now(),
        last_seen_at timestamptz not null,
        expires_at timestamptz not null,
        revoked_at timestamptz
      );`);
    this.addSql(`create index operator_sessions_operator_idx on operator_sessions (operator_id);`);
    this.addSql(`
      create table console_signin_failures (
        key text not null,
        window_start timestamptz not null,
        count integer not null,
        primary key (key, window_start)
      );`);
    // Past windows are deleted by the statement that counts a failure (db/sql/signin-failures.ts).
    this.addSql(`create index console_signin_failures_window_idx on console_signin_failures (window_start);`);
    this.addSql(`alter table audit_log add column actor text;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table audit_log drop column actor;`);
    this.addSql(`drop table console_signin_failures;`);
    this.addSql(`drop table operator_sessions;`);
    this.addSql(`drop table operator_links;`);
    this.addSql(`drop table operators;`);
  }
}
