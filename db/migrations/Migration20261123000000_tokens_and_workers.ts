import { Migration } from '@mikro-orm/migrations';

/**
 * - api_key_tokens: every token of a key, hashed. A rotation gives the token it supersedes its own
 *   24 hours; before, one previous_token_hash column was overwritten, so a second rotation within
 *   a day ended the first old token at once (spec: "the old token stays valid for 24 hours").
 * - workers: one row per running process of the embedded engine (its DBOS executor id), renewed
 *   by a heartbeat. A process recovers only its own unfinished workflows at start; another's are
 *   taken over only once its heartbeat is stale (worker/executors.ts). Before, every process ran
 *   as executor "local", so a second process re-ran the first one's in-flight sends.
 */
export class Migration20261123000000_tokens_and_workers extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table api_key_tokens (
        token_hash text primary key,
        -- Deferred: MikroORM may insert a key and its token in either order within one transaction.
        api_key_id uuid not null references api_keys(id) on delete cascade deferrable initially deferred,
        token_prefix text not null,
        created_at timestamptz not null,
        expires_at timestamptz
      );`);
    this.addSql(`create index api_key_tokens_key_idx on api_key_tokens (api_key_id);`);
    this.addSql(`create unique index api_key_tokens_current_idx on api_key_tokens (api_key_id) where expires_at is null;`);
    this.addSql(`
      insert into api_key_tokens (token_hash, api_key_id, token_prefix, created_at, expires_at)
      select token_hash, id, token_prefix, coalesce(rotated_at, created_at), null from api_keys;`);
    this.addSql(`
      insert into api_key_tokens (token_hash, api_key_id, token_prefix, created_at, expires_at)
      select previous_token_hash, id, 'svc_' || mode || '_', created_at, previous_token_expires_at from api_keys
       where previous_token_hash is not null and previous_token_expires_at > now();`);
    this.addSql(
      `alter table api_keys drop column token_hash, drop column token_prefix, drop column previous_token_hash, drop column previous_token_expires_at, drop column rotated_at;`,
    );
    // Whether the window's last single charge was admitted (authentication charges and decides in one upsert).
    this.addSql(`alter table key_rate_windows add column admitted boolean not null default true;`);
    this.addSql(`
      create table workers (
        id text primary key,
        host text not null,
        pid integer not null,
        started_at timestamptz not null,
        heartbeat_at timestamptz not null
      );`);
    // Processes before this migration all ran as "local": what they left unfinished is taken over
    // once this row is as stale as a dead process's (stop them before upgrading: README, Upgrading).
    this.addSql(`insert into workers (id, host, pid, started_at, heartbeat_at) values ('local', '', 0, now(), now());`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table workers;');
    this.addSql('alter table key_rate_windows drop column admitted;');
    this.addSql(
      `alter table api_keys add column token_hash text unique, add column token_prefix text, add column previous_token_hash text unique, add column previous_token_expires_at timestamptz, add column rotated_at timestamptz;`,
    );
    this.addSql(`
      update api_keys a set token_hash = t.token_hash, token_prefix = t.token_prefix
        from api_key_tokens t where t.api_key_id = a.id and t.expires_at is null;`);
    this.addSql('alter table api_keys alter column token_hash set not null, alter column token_prefix set not null;');
    this.addSql('drop table api_key_tokens;');
  }
}
