import { Migration } from '@mikro-orm/migrations';

/**
 * DKIM keys and their rotation (issue 41). A domain holds several keys, each under its own
 * selector, never reused (rows are never deleted, so the unique index keeps a selector out for
 * good); signing uses the one `active` key. One rotation at a time per domain: at most one key is
 * pending or retiring (a partial unique index decides, whichever process starts one).
 * Each domain's existing key moves in as `active`, and a trigger adds the first key of domains made
 * later; the domains columns keep mirroring the active key for the API's `dkim_selector` and
 * older readers.
 */
export class Migration20261212000000_dkim_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table dkim_keys (
      id uuid primary key,
      domain_id uuid not null references domains (id) on delete cascade,
      selector text not null,
      algorithm text not null default 'rsa' check (algorithm in ('rsa', 'ed25519')),
      public_key text not null,
      private_key_enc text null,
      state text not null check (state in ('pending', 'active', 'retiring', 'revoked')),
      rotation_id uuid null,
      retired_by uuid null,
      matching_checks integer not null default 0,
      last_observed text null,
      last_checked_at timestamptz null,
      created_at timestamptz not null,
      activated_at timestamptz null,
      retiring_at timestamptz null,
      revoke_after timestamptz null,
      revoked_at timestamptz null,
      check (state <> 'revoked' or private_key_enc is null)
    );`);
    this.addSql(`create unique index dkim_keys_selector_uq on dkim_keys (domain_id, selector);`);
    this.addSql(`create unique index dkim_keys_one_rotation_uq on dkim_keys (domain_id) where state in ('pending', 'retiring');`);
    this.addSql(`create index dkim_keys_active_idx on dkim_keys (domain_id) where state = 'active';`);
    this.addSql(`insert into dkim_keys (id, domain_id, selector, public_key, private_key_enc, state, created_at, activated_at)
      select svc_uuidv7(), id, dkim_selector, dkim_public_key, dkim_private_key_enc, 'active', created_at, created_at
        from domains
       where dkim_selector is not null and dkim_public_key is not null and dkim_private_key_enc is not null;`);
    // A domain given its first key later (POST /domains, `svc domain create`, the identity given at
    // boot to a domain made --verified) gets its key row in the same statement, whichever path wrote it.
    this.addSql(`create function svc_dkim_first_key() returns trigger language plpgsql as $$
      begin
        if new.dkim_selector is not null and new.dkim_public_key is not null and new.dkim_private_key_enc is not null
           and not exists (select 1 from dkim_keys where domain_id = new.id) then
          insert into dkim_keys (id, domain_id, selector, public_key, private_key_enc, state, created_at, activated_at)
          values (svc_uuidv7(), new.id, new.dkim_selector, new.dkim_public_key, new.dkim_private_key_enc, 'active', now(), now())
          on conflict do nothing;
        end if;
        return null;
      end $$;`);
    this.addSql(`create trigger domains_dkim_first_key after insert or update of dkim_selector on domains
      for each row execute function svc_dkim_first_key();`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop trigger domains_dkim_first_key on domains;`);
    this.addSql(`drop function svc_dkim_first_key();`);
    this.addSql(`drop table dkim_keys;`);
  }
}
