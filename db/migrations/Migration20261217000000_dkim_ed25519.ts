import { Migration } from '@mikro-orm/migrations';

/**
 * An Ed25519 key signed alongside the RSA one (RFC 8463, issue 41). A rotation may add an Ed25519
 * companion to its new RSA key: `companion_of` names the RSA key it moves with (pending, active,
 * retiring and revoked together). One rotation at a time is now one pending or retiring key per
 * domain and algorithm: the pair of a rotation fits, two rotations still do not (the RSA key of
 * each rotation is inserted first, so its index decides between two starts).
 */
export class Migration20261217000000_dkim_ed25519 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table dkim_keys add column companion_of uuid null references dkim_keys (id);`);
    this.addSql(`create index dkim_keys_companion_idx on dkim_keys (companion_of) where companion_of is not null;`);
    this.addSql(`drop index dkim_keys_one_rotation_uq;`);
    this.addSql(
      `create unique index dkim_keys_one_rotation_uq on dkim_keys (domain_id, algorithm) where state in ('pending', 'retiring');`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop index dkim_keys_one_rotation_uq;`);
    this.addSql(`create unique index dkim_keys_one_rotation_uq on dkim_keys (domain_id) where state in ('pending', 'retiring');`);
    this.addSql(`drop index dkim_keys_companion_idx;`);
    this.addSql(`alter table dkim_keys drop column companion_of;`);
  }
}
