import { Migration } from '@mikro-orm/migrations';

/**
 * Signed webhooks (issue 13).
 * - webhook_endpoints: an organization's receivers. `events` null = every event. Secrets are
 *   sealed with SECRETS_KEY (like DKIM keys); a rotated-out secret keeps signing until
 *   `previous_secret_until`. `failing_since` is the first failed attempt since the last success.
 * - webhook_events: one row per event that matched at least one enabled endpoint, holding the
 *   body as `json` (not jsonb) so its bytes, and so its signature, are the same on every retry.
 * - webhook_deliveries: one per (event, endpoint), the outbox of the WebhookDelivery workflow:
 *   `enqueued_at` null until its run started; `run` counts runs (a manual retry or `recover`
 *   starts the next one, and a superseded run stops at its next attempt).
 *
 * Fan-out is decided by triggers, so every writer of an event (the store statement, the delivery
 * activities, contact statements, domain verification, and the ones to come) adds the deliveries
 * in its own transaction, and nothing is lost between an event and its POST. The triggers are
 * statement-level with transition tables: one set-based insert per statement, and an
 * organization without endpoints costs an index probe per event row. They notify
 * `svc_webhooks` so every process's dispatcher wakes at commit.
 */
export class Migration20261126000000_webhooks extends Migration {
  override async up(): Promise<void> {
    // UUIDv7 in SQL (PostgreSQL 17 has none): deliveries list newest first by id within a time.
    this.addSql(`
      create function svc_uuidv7() returns uuid language sql volatile as $$
        select encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing
          substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid
      $$;`);
    this.addSql(`
      create table webhook_endpoints (
        id uuid primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        url text not null,
        description text,
        events text[],
        enabled boolean not null default true,
        disabled_reason text,
        secret_enc text not null,
        previous_secret_enc text,
        previous_secret_until timestamptz,
        failing_since timestamptz,
        created_at timestamptz not null,
        updated_at timestamptz not null
      );`);
    this.addSql(`create index webhook_endpoints_org_idx on webhook_endpoints (organization_id) where enabled;`);
    this.addSql(`create index webhook_endpoints_list_idx on webhook_endpoints (organization_id, created_at desc, id desc);`);
    this.addSql(`
      create table webhook_events (
        id bigserial primary key,
        organization_id uuid not null references organizations(id) on delete cascade,
        type text not null,
        payload json not null,
        created_at timestamptz not null
      );`);
    this.addSql(`
      create table webhook_deliveries (
        id uuid primary key default svc_uuidv7(),
        organization_id uuid not null,
        endpoint_id uuid not null references webhook_endpoints(id) on delete cascade,
        event_id bigint not null references webhook_events(id) on delete cascade,
        event_type text not null,
        status text not null default 'pending',
        attempts int not null default 0,
        run int not null default 1,
        last_status_code int,
        last_error text,
        last_response text,
        next_attempt_at timestamptz,
        enqueued_at timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      );`);
    this.addSql(`create index webhook_deliveries_event_idx on webhook_deliveries (event_id);`);
    this.addSql(`create index webhook_deliveries_list_idx on webhook_deliveries (endpoint_id, created_at desc, id desc);`);
    // The dispatcher's claim (not started yet, oldest first per endpoint) and its in-flight count.
    this.addSql(
      `create index webhook_deliveries_outbox_idx on webhook_deliveries (endpoint_id, created_at, id) where enqueued_at is null;`,
    );
    this.addSql(
      `create index webhook_deliveries_due_idx on webhook_deliveries (endpoint_id, next_attempt_at) where status = 'pending' and enqueued_at is not null;`,
    );
    this.addSql(`create index webhook_deliveries_failed_idx on webhook_deliveries (endpoint_id, created_at) where status = 'failed';`);

    // One helper for every fan-out trigger: events in, deliveries out. `rows` holds
    // (organization_id, type, payload json, created_at) per event.
    this.addSql(`
      create function svc_webhook_fanout(rows jsonb) returns void language plpgsql as $$
      begin
        with ev as (
          select nextval('webhook_events_id_seq') as id, x.organization_id, x.type, x.payload, x.created_at
            from jsonb_to_recordset(rows) as x(organization_id uuid, type text, payload text, created_at timestamptz)
           where exists (select 1 from webhook_endpoints w
                          where w.organization_id = x.organization_id and w.enabled and (w.events is null or x.type = any(w.events)))
        ), ins as (
          insert into webhook_events (id, organization_id, type, payload, created_at)
          select id, organization_id, type, payload::json, created_at from ev
        )
        insert into webhook_deliveries (organization_id, endpoint_id, event_id, event_type, next_attempt_at)
        select ev.organization_id, w.id, ev.id, ev.type, now()
          from ev join webhook_endpoints w
            on w.organization_id = ev.organization_id and w.enabled and (w.events is null or ev.type = any(w.events));
        if found then perform pg_notify('svc_webhooks', ''); end if;
      end $$;`);

    const iso = (col: string) => `to_char(${col} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
    // Message events: the payload names the message as it was sent.
    this.addSql(`
      create function svc_webhook_email_events() returns trigger language plpgsql as $$
      begin
        if not exists (select 1 from new_rows n join webhook_endpoints w on w.organization_id = n.organization_id and w.enabled) then
          return null;
        end if;
        perform svc_webhook_fanout((
          select jsonb_agg(jsonb_build_object(
                   'organization_id', n.organization_id, 'type', 'email.' || n.type, 'created_at', n.at,
                   -- Built as json text, so keys keep this order; the optional fields are appended only when present.
                   'payload', json_build_object('type', 'email.' || n.type, 'created_at', ${iso('n.at')}, 'data',
                     (rtrim(json_build_object('email_id', e.id, 'from', e.from_address, 'to', e.to_addresses, 'subject', e.subject,
                        'recipient', n.recipient, 'mode', e.mode, 'kind', e.kind, 'tags', e.tags)::text, '}')
                      || coalesce(', "bounce_type" : ' || to_json(n.bounce_type)::text, '')
                      || coalesce(', "detail" : ' || to_json(n.detail)::text, '')
                      || coalesce(', "url" : ' || to_json(n.url)::text, '') || '}')::json)::text)
                 order by n.id)
            from new_rows n join emails e on e.id = n.email_id));
        return null;
      end $$;`);
    this.addSql(`
      create trigger email_events_webhooks after insert on email_events
        referencing new table as new_rows for each statement execute function svc_webhook_email_events();`);

    // Contacts: created, updated (a change of what the contact object shows), deleted.
    const contact = (r: string) => `json_build_object('id', ${r}.id, 'email', ${r}.email, 'first_name', ${r}.first_name,
        'last_name', ${r}.last_name, 'status', ${r}.status, 'properties', ${r}.properties,
        'created_at', ${iso(`${r}.created_at`)}, 'updated_at', ${iso(`${r}.updated_at`)})`;
    const contactEvents = (type: string, from: string, r: string) => `
        if not exists (select 1 from ${from} join webhook_endpoints w on w.organization_id = ${r}.organization_id and w.enabled) then
          return null;
        end if;
        perform svc_webhook_fanout((
          select jsonb_agg(jsonb_build_object('organization_id', ${r}.organization_id, 'type', '${type}', 'created_at', now(),
                   'payload', json_build_object('type', '${type}', 'created_at', ${iso('now()')}, 'data', ${contact(r)})::text))
            from ${from}));`;
    this.addSql(`
      create function svc_webhook_contacts_inserted() returns trigger language plpgsql as $$
      begin ${contactEvents('contact.created', 'new_rows n', 'n')}
        return null;
      end $$;`);
    this.addSql(`
      create function svc_webhook_contacts_updated() returns trigger language plpgsql as $$
      begin ${contactEvents(
        'contact.updated',
        `new_rows n join old_rows o on o.id = n.id
           and (o.email, o.first_name, o.last_name, o.status, o.properties::jsonb)
               is distinct from (n.email, n.first_name, n.last_name, n.status, n.properties::jsonb)`,
        'n',
      )}
        return null;
      end $$;`);
    this.addSql(`
      create function svc_webhook_contacts_deleted() returns trigger language plpgsql as $$
      begin ${contactEvents('contact.deleted', 'old_rows o', 'o')}
        return null;
      end $$;`);
    this.addSql(`create trigger contacts_webhooks_inserted after insert on contacts
        referencing new table as new_rows for each statement execute function svc_webhook_contacts_inserted();`);
    this.addSql(`create trigger contacts_webhooks_updated after update on contacts
        referencing old table as old_rows new table as new_rows for each statement execute function svc_webhook_contacts_updated();`);
    this.addSql(`create trigger contacts_webhooks_deleted after delete on contacts
        referencing old table as old_rows for each statement execute function svc_webhook_contacts_deleted();`);

    // Domains: the moment a domain becomes verified (by its loop, "verify now" or an operator).
    const domainVerified = (name: string, from: string) => `
      create function ${name}() returns trigger language plpgsql as $$
      begin
        perform svc_webhook_fanout((
          select jsonb_agg(jsonb_build_object('organization_id', n.organization_id, 'type', 'domain.verified', 'created_at', now(),
                   'payload', json_build_object('type', 'domain.verified', 'created_at', ${iso('now()')}, 'data',
                     json_build_object('id', n.id, 'name', n.name, 'status', n.status))::text))
            from ${from}
           where n.status = 'verified' and n.deleted_at is null));
        return null;
      end $$;`;
    this.addSql(domainVerified('svc_webhook_domains_inserted', 'new_rows n'));
    this.addSql(domainVerified('svc_webhook_domains_updated', `new_rows n join old_rows o on o.id = n.id and o.status <> 'verified'`));
    this.addSql(`create trigger domains_webhooks_inserted after insert on domains
        referencing new table as new_rows for each statement execute function svc_webhook_domains_inserted();`);
    this.addSql(`create trigger domains_webhooks_updated after update on domains
        referencing old table as old_rows new table as new_rows for each statement execute function svc_webhook_domains_updated();`);
  }
}
