import { Migration } from '@mikro-orm/migrations';

/**
 * The audience of an organization (spec: Contact, Topic, Segment):
 * - contacts: one per (organization, email), enforced by a unique index, so two concurrent upserts
 *   of a new address meet at the index and one of them updates instead. `email` collates as "C" so
 *   that index also serves the list's prefix filter (`like 'ab%'`). The 100-key ceiling on
 *   `properties` is a CHECK constraint: properties merge inside the upsert statement, so only
 *   PostgreSQL sees the merged object; a violation fails the statement and nothing is written.
 * - topics: slug unique per organization.
 * - subscriptions: the explicit rows only; a contact without a row has the topic's default.
 *   (topic_id, state, contact_id) lets segment counts and list filters test membership from the
 *   index alone.
 * - segments: a saved filter, evaluated when read.
 * - automation_triggers: `contact.created` and `topic.subscribed`, written by the same statement
 *   as the change that fires them, for the automations consumer (issue 17). No foreign key to
 *   contacts: a trigger outlives a deleted contact and its consumer decides what that means.
 */
export class Migration20261124000000_audience extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create function svc_jsonb_key_count(jsonb) returns int language sql immutable strict parallel safe
        as 'select count(*)::int from jsonb_object_keys($1)';`);
    this.addSql(`
      create table contacts (
        id uuid primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        email text collate "C" not null,
        first_name text,
        last_name text,
        status text not null check (status in ('subscribed', 'unsubscribed', 'bounced')),
        properties jsonb not null default '{}',
        created_at timestamptz not null,
        updated_at timestamptz not null,
        constraint contacts_properties_limit check (jsonb_typeof(properties) = 'object' and svc_jsonb_key_count(properties) <= 100)
      );`);
    this.addSql(`create unique index contacts_email_idx on contacts (organization_id, email);`);
    this.addSql(`create index contacts_created_idx on contacts (organization_id, created_at desc, id desc);`);
    this.addSql(`
      create table topics (
        id uuid primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        slug text collate "C" not null,
        name text not null,
        default_opt_in boolean not null,
        created_at timestamptz not null
      );`);
    this.addSql(`create unique index topics_slug_idx on topics (organization_id, slug);`);
    this.addSql(`
      create table subscriptions (
        contact_id uuid not null references contacts(id) on delete cascade,
        topic_id uuid not null references topics(id) on delete cascade,
        state text not null check (state in ('subscribed', 'unsubscribed')),
        source text not null,
        changed_at timestamptz not null,
        primary key (contact_id, topic_id)
      );`);
    this.addSql(`create index subscriptions_topic_idx on subscriptions (topic_id, state, contact_id);`);
    this.addSql(`
      create table segments (
        id uuid primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        name text not null,
        filter jsonb not null,
        created_at timestamptz not null
      );`);
    this.addSql(`create index segments_created_idx on segments (organization_id, created_at desc, id desc);`);
    this.addSql(`
      create table automation_triggers (
        id bigint generated always as identity primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        type text not null check (type in ('contact.created', 'topic.subscribed')),
        contact_id uuid not null,
        topic_id uuid,
        created_at timestamptz not null default now(),
        consumed_at timestamptz
      );`);
    this.addSql(`create index automation_triggers_pending_idx on automation_triggers (id) where consumed_at is null;`);
  }

  override async down(): Promise<void> {
    for (const t of ['automation_triggers', 'segments', 'subscriptions', 'topics', 'contacts']) this.addSql(`drop table if exists ${t};`);
    this.addSql('drop function if exists svc_jsonb_key_count(jsonb);');
  }
}
