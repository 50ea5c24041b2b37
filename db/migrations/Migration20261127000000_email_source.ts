import { Migration } from '@mikro-orm/migrations';

/**
 * SMTP relay (issue 19): emails.source says which ingress accepted a message, `api` or `smtp`.
 * Everything else about a relayed message is what `POST /emails` stores; this is the one thing
 * `GET /emails` shows apart. Existing rows came through the API.
 */
export class Migration20261127000000_email_source extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table emails add column source text not null default 'api' check (source in ('api', 'smtp'));`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table emails drop column source;`);
  }
}
