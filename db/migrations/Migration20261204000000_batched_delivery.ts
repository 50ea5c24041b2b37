import { Migration } from '@mikro-orm/migrations';

/**
 * Batched delivery (issue 20):
 * - emails.claimed_by: the workflow that moved the message to `sending`. A delivery batch is
 *   started per outbox chunk, and a chunk claimed again after a crash may group messages
 *   differently, so two batch workflows can name one message: the claim (`status = 'queued'`, or
 *   `sending` by this same workflow when it resumes) decides which one delivers it.
 * - send_rate: the platform send rate's current window (SEND_RATE_PER_SECOND), one row that every
 *   outbox takes its starts from in the transaction that marks them, so the rate holds per message
 *   across processes whatever the engine and however messages are batched.
 */
export class Migration20261204000000_batched_delivery extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table emails add column claimed_by text;`);
    this.addSql(`create table send_rate (id smallint primary key check (id = 1), window_no bigint not null, used integer not null);`);
    this.addSql(`insert into send_rate (id, window_no, used) values (1, 0, 0);`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table send_rate;`);
    this.addSql(`alter table emails drop column claimed_by;`);
  }
}
