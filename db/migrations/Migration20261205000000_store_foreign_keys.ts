import { Migration } from '@mikro-orm/migrations';

/**
 * Broadcast fan-out (issue 18): the rows the store statement writes for a message carry no foreign
 * keys it already checks itself.
 *
 * - emails.organization_id, api_key_id, domain_id. Each foreign key check locks its parent row
 *   (FOR KEY SHARE). Every message of a send locks the same three rows, and a broadcast stores its
 *   pages in several statements at once, so those rows are locked by several transactions at a
 *   time, which PostgreSQL records as a multixact that each check reads and replaces.
 * - recipients.email_id. Its one writer is the store statement, which inserts a message's
 *   recipients joined to the messages that same statement inserted; each check locked that new row
 *   once more.
 *
 * Measured on a 30,000-recipient fan-out, runs interleaved: 15% faster without the three keys of
 * emails, about 10% more without the recipients one as well (docs/architecture.md).
 *
 * What they guarded is decided where the rows are written: the store statement stores a message
 * only for a live key of its organization and a verified domain of it, in the same statement.
 * Organizations, keys and domains are never deleted (keys are revoked, domains marked deleted) and
 * neither are emails, so no parent disappears afterwards. Should an organization or its mail ever
 * be deleted, it is deleted explicitly, in batches, as a cascade over millions of rows could not
 * be anyway. email_events kept its key here; Migration20261206000000_fan_out_foreign_keys drops it.
 */
export class Migration20261205000000_store_foreign_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table emails drop constraint emails_organization_id_fkey;`);
    this.addSql(`alter table emails drop constraint emails_api_key_id_fkey;`);
    this.addSql(`alter table emails drop constraint emails_domain_id_fkey;`);
    this.addSql(`alter table recipients drop constraint recipients_email_id_fkey;`);
  }

  override async down(): Promise<void> {
    this.addSql(
      `alter table recipients add constraint recipients_email_id_fkey foreign key (email_id) references emails(id) on delete cascade deferrable initially deferred;`,
    );
    this.addSql(
      `alter table emails add constraint emails_organization_id_fkey foreign key (organization_id) references organizations(id) on delete cascade;`,
    );
    this.addSql(`alter table emails add constraint emails_api_key_id_fkey foreign key (api_key_id) references api_keys(id);`);
    this.addSql(`alter table emails add constraint emails_domain_id_fkey foreign key (domain_id) references domains(id);`);
  }
}
