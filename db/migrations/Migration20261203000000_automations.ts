import { Migration } from '@mikro-orm/migrations';

/**
 * Events and automations (issue 17):
 * - automations: the current definition's trigger in columns (what POST /events and the trigger
 *   consumer match on), `version` the latest, `enabled_since` when it last became enabled (a
 *   trigger row older than that is not its concern). `park_first_seconds`: the latest version
 *   begins with a long delay, so a new run is written already parked in it (no workflow until the
 *   delay is over). Deleting keeps the row (`deleted_at`) so
 *   its runs stay readable.
 * - automation_versions: every definition ever written, immutable; a run reads the version it
 *   started with.
 * - automation_runs: one per (automation, contact, dedupe key). The id is derived from those three
 *   (md5 as a UUID), so the primary key is the dedupe rule and the workflow id derived from the id
 *   makes an engine-level duplicate start a no-op too. `started_at` null is the outbox of run
 *   starts (not before `resume_at`: a run parked in a long delay holds no workflow, only this row;
 *   each start after a park is a new `segment`); `wake_at` set is the outbox of signals (an event
 *   that resumed a wait, a cancel).
 * - event_quotas: per organization and UTC day, what POST /events spent. Each row carries its
 *   limits and a CHECK against them, so the statement that would exceed one fails whole: the 429
 *   rolls back the contact, the runs and the counts together.
 */
export class Migration20261203000000_automations extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table organizations add column event_contact_quota integer not null default 1000;`);
    this.addSql(`alter table organizations add column event_run_quota integer not null default 5000;`);
    this.addSql(`
      create table automations (
        id uuid primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        name text not null,
        enabled boolean not null,
        version integer not null,
        trigger_type text not null check (trigger_type in ('event', 'contact.created', 'topic.subscribed')),
        trigger_event text,
        trigger_topic_id uuid,
        api_key_id uuid not null,
        park_first_seconds integer,
        enabled_since timestamptz,
        deleted_at timestamptz,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );`);
    this.addSql(`create index automations_org_idx on automations (organization_id, created_at desc, id desc) where deleted_at is null;`);
    this.addSql(`
      create index automations_trigger_idx on automations (organization_id, trigger_type, trigger_event)
        where enabled and deleted_at is null;`);
    this.addSql(`
      create table automation_versions (
        automation_id uuid not null references automations(id) on delete cascade,
        version integer not null,
        definition jsonb not null,
        api_key_id uuid not null,
        created_at timestamptz not null,
        primary key (automation_id, version)
      );`);
    this.addSql(`
      create table automation_runs (
        id uuid primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        automation_id uuid not null references automations(id) on delete cascade,
        version integer not null,
        contact_id uuid not null,
        email text not null,
        dedupe_key text not null,
        trigger jsonb not null,
        data jsonb not null default '{}',
        status text not null check (status in ('running', 'waiting', 'completed', 'canceled', 'failed')),
        step text,
        history jsonb not null default '[]',
        reason text,
        waiting_event text,
        wait_deadline timestamptz,
        resumed jsonb,
        wake_at timestamptz,
        resume_at timestamptz,
        resume_path text,
        segment integer not null default 0,
        started_at timestamptz,
        created_at timestamptz not null,
        updated_at timestamptz not null,
        finished_at timestamptz
      );`);
    this.addSql(`create index automation_runs_list_idx on automation_runs (automation_id, created_at desc, id desc);`);
    this.addSql(`
      create index automation_runs_outbox_idx on automation_runs ((coalesce(resume_at, created_at)))
        where started_at is null and status in ('running', 'waiting');`);
    this.addSql(`create index automation_runs_wake_idx on automation_runs (wake_at) where wake_at is not null;`);
    this.addSql(`create index automation_runs_waiting_idx on automation_runs (contact_id, waiting_event) where status = 'waiting';`);
    this.addSql(`
      create table event_quotas (
        organization_id uuid not null references organizations(id) on delete cascade,
        day date not null,
        contacts integer not null,
        contacts_limit integer not null,
        runs integer not null,
        runs_limit integer not null,
        primary key (organization_id, day),
        constraint event_quotas_contacts check (contacts <= contacts_limit),
        constraint event_quotas_runs check (runs <= runs_limit)
      );`);
    this.addSql(`alter table emails drop constraint if exists emails_source_check;`);
    this.addSql(`alter table emails add constraint emails_source_check check (source in ('api', 'smtp', 'broadcast', 'automation'));`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table emails drop constraint if exists emails_source_check;`);
    this.addSql(`alter table emails add constraint emails_source_check check (source in ('api', 'smtp', 'broadcast'));`);
    for (const t of ['event_quotas', 'automation_runs', 'automation_versions', 'automations']) this.addSql(`drop table if exists ${t};`);
    this.addSql(`alter table organizations drop column event_run_quota;`);
    this.addSql(`alter table organizations drop column event_contact_quota;`);
  }
}
