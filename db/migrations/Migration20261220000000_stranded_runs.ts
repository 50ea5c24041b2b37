import { Migration } from '@mikro-orm/migrations';

/**
 * Messages whose run has started and not finished them, oldest change first (issue 51): what the
 * stranded-run sweep (worker/stranded-runs.ts) pages through to find those whose run an operator
 * terminated or reset in the Temporal UI. Open messages are few next to finished ones, so the
 * index stays small. emails.started_run: the workflow id of the run the outbox started it on
 * (claimed_by says which run claimed it, once one has).
 */
export class Migration20261220000000_stranded_runs extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table emails add column started_run text null;`);
    this.addSql(
      `create index emails_open_runs_idx on emails (updated_at, id) where status in ('queued', 'sending') and enqueued_at is not null;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop index emails_open_runs_idx;`);
    this.addSql(`alter table emails drop column started_run;`);
  }
}
