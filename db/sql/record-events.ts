import type { Orm } from '../orm';
import type { PropertyValue } from '../entities';
import { runPrepared, type PreparedStatement } from '../prepared';
import { requestsByToken } from './rate-window';
import { RUN_COLUMNS, runValues } from './automation-run-insert';

/** One POST /events of a group. */
export interface EventRequest {
  /** The SHA-256 of the caller's token: the statement authenticates it and charges one request. */
  tokenHash: string;
  /** Lower-cased and trimmed: the contact's key; unique within a group (one row changes once per statement). */
  email: string;
  /** Used only when the contact is new. */
  newContactId: string;
  /** The event's data as a property patch (contact rules: null deletes a key). */
  set: Record<string, PropertyValue>;
  remove: string[];
  name: string;
  eventId: string;
}

/** The key's verdict on one request and, when it could post (admitted, live), what its event did. */
export interface RecordedEvent {
  req: number;
  known: boolean;
  admitted: boolean;
  mode: 'live' | 'test' | null;
  rate_limit: number | null;
  /** Null when the contact was created by a concurrent request this statement's snapshot missed: run it again. */
  contact_id: string | null;
  created: boolean;
  runs: number;
  resumed: number;
}

/**
 * POST /events, a group of them in one statement and one commit (core/automations/group-events.ts
 * groups them; all of a statement or none of it is written), so a quota refusal rolls back
 * everything its request did:
 * - keys: found by token, charged one per request, admitted in order (as db/sql/upsert-contacts.ts);
 *   only admitted requests of live keys write (`ok`), every verdict is answered;
 * - the contact: inserted, or its properties merged with the event's data, only when that changes
 *   them (an event with nothing new writes no contact row and fires no `contact.updated`);
 * - one run per enabled automation whose trigger is the event's name, or `contact.created` when
 *   the contact was just created by an unrestricted key. The run id is md5(automation, contact,
 *   dedupe key) as a UUID: the same event id for the same automation and contact meets the primary
 *   key and starts nothing (a concurrent repeat waits for the first to commit, then does nothing);
 * - this contact's runs waiting in `wait_for_event` for this name: resumed (`resumed`, the event's
 *   data over the run's, `wake_at` for the dispatcher's signal);
 * - the day's quotas per organization, only when something was spent: the row's CHECKs
 *   (event_quotas_contacts, event_quotas_runs) fail the whole statement past a limit. A failed
 *   group runs again one request per statement, so only the request over the limit gets the 429.
 * Contacts are written in (organization, email) order and quota rows in organization order, so
 * concurrent statements lock in one order.
 *
 * $1 requests (JSON array), $2 now, $3 UTC day.
 */
const RECORD_EVENTS: PreparedStatement = {
  name: 'record_events_v1',
  text: `
with q as (
  select * from jsonb_to_recordset($1::jsonb) as x(
    req int, token_hash text, new_id uuid, email text, props jsonb, remove text[], name text, event_id text)
), ${requestsByToken('q')}, ok as (
  select q.*, p.organization_id, p.domain_ids is null as unrestricted from p join q on q.req = p.req where p.admitted and p.mode = 'live'
), ins as (
  insert into contacts as x (id, organization_id, email, status, properties, created_at, updated_at)
  select ok.new_id, ok.organization_id, ok.email, 'subscribed', ok.props, $2, $2 from ok order by ok.organization_id, ok.email
  on conflict (organization_id, email) do update
    set properties = (select (x.properties || o.props) - o.remove from ok o where o.organization_id = x.organization_id and o.email = x.email),
        updated_at = $2
    where (select (x.properties || o.props) - o.remove from ok o where o.organization_id = x.organization_id and o.email = x.email)
          is distinct from x.properties
  returning x.id, x.organization_id, x.email, (x.xmax = 0) as created
), cur as (
  select ok.req, ok.organization_id, ok.name, ok.event_id, ok.props, ok.unrestricted, c.id as contact_id, c.email, c.created
    from ok join (
      select id, organization_id, email, created from ins
      union all
      select c.id, c.organization_id, c.email, false from contacts c
       where (c.organization_id, c.email) in (select organization_id, email from ok)
         and not exists (select 1 from ins where ins.organization_id = c.organization_id and ins.email = c.email)
    ) c on c.organization_id = ok.organization_id and c.email = ok.email
), matched as (
  select cur.req, cur.contact_id, cur.email, cur.organization_id, cur.props, a.id, a.version, a.park_first_seconds,
         case when a.trigger_type = 'event' then 'event:' || cur.event_id else 'contact.created' end as key,
         jsonb_build_object('type', a.trigger_type, 'event', cur.name, 'event_id', cur.event_id) as trigger
    from cur join automations a on a.organization_id = cur.organization_id and a.enabled and a.deleted_at is null
     and ((a.trigger_type = 'event' and a.trigger_event = cur.name)
       or (a.trigger_type = 'contact.created' and cur.created and cur.unrestricted))
), runs as (
  insert into automation_runs (${RUN_COLUMNS})
  select ${runValues({ id: "md5(m.id::text || ':' || m.contact_id::text || ':' || m.key)::uuid", org: 'm.organization_id', a: 'm', contact: 'm.contact_id', email: 'm.email', key: 'm.key', trigger: 'm.trigger', data: 'm.props', now: '$2' })}
    from matched m order by 1
  on conflict (id) do nothing
  returning contact_id, organization_id
), resumed as (
  update automation_runs r set resumed = jsonb_build_object('event', cur.name, 'event_id', cur.event_id, 'at', $2::timestamptz),
         data = r.data || cur.props, wake_at = $2, updated_at = $2
    from cur
   where r.contact_id = cur.contact_id and r.status = 'waiting' and r.waiting_event = cur.name and r.resumed is null and r.wait_deadline > $2
  returning r.contact_id
), spent as (
  select o.id as organization_id, o.event_contact_quota, o.event_run_quota,
         (select count(*)::int from cur where cur.organization_id = o.id and cur.created) as contacts,
         (select count(*)::int from runs where runs.organization_id = o.id) as runs
    from organizations o where o.id in (select organization_id from ok)
), quota as (
  insert into event_quotas as q (organization_id, day, contacts, contacts_limit, runs, runs_limit)
  select s.organization_id, $3, s.contacts, s.event_contact_quota, s.runs, s.event_run_quota
    from spent s where s.contacts > 0 or s.runs > 0 order by s.organization_id
  on conflict (organization_id, day) do update
    set contacts = q.contacts + excluded.contacts, runs = q.runs + excluded.runs,
        contacts_limit = excluded.contacts_limit, runs_limit = excluded.runs_limit
  returning 1
)
select q.req, p.id is not null as known, coalesce(p.admitted, false) as admitted, p.mode, p.rate_limit,
       cur.contact_id, coalesce(cur.created, false) as created,
       (select count(*)::int from runs where runs.contact_id = cur.contact_id) as runs,
       (select count(*)::int from resumed where resumed.contact_id = cur.contact_id) as resumed
  from q left join p on p.req = q.req left join cur on cur.req = q.req
 order by q.req`,
};

export async function recordEvents(orm: Orm, requests: EventRequest[], now: Date): Promise<RecordedEvent[]> {
  return runPrepared<RecordedEvent>(orm, RECORD_EVENTS, [
    JSON.stringify(
      requests.map((r, req) => ({
        req,
        token_hash: r.tokenHash,
        new_id: r.newContactId,
        email: r.email,
        props: r.set,
        remove: r.remove,
        name: r.name,
        event_id: r.eventId,
      })),
    ),
    now,
    now.toISOString().slice(0, 10),
  ]);
}
