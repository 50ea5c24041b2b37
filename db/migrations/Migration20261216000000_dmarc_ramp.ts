import { Migration } from '@mikro-orm/migrations';

/**
 * The DMARC policy ramp (issue 41): one row per domain whose `_dmarc` record the service ramps.
 * - step / step_since: the policy published now and since when (the gate counts reports from then).
 * - requested*: the operator's pending request (advance, back, stop); signals carry no payload, so
 *   what was asked and by whom waits here until the DmarcRamp run applies it.
 * - verdict*: the gate as last decided (daily and on each request), for the page to show.
 * - refusal*: the last advance refused because its gate did not hold at that moment.
 */
export class Migration20261216000000_dmarc_ramp extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create table dmarc_ramps (
      domain_id uuid primary key references domains (id) on delete cascade,
      step text not null check (step in ('none', 'quarantine', 'reject')),
      step_since timestamptz not null,
      run_id text null,
      state text not null default 'running' check (state in ('running', 'stopped')),
      started_by text null,
      requested text null check (requested in ('advance', 'back', 'stop')),
      requested_by text null,
      requested_at timestamptz null,
      verdict jsonb null,
      verdict_at timestamptz null,
      refusal jsonb null,
      refusal_at timestamptz null,
      updated_at timestamptz not null default now()
    );`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists dmarc_ramps;`);
  }
}
