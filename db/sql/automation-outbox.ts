import type { Orm } from '../orm';
import { RUN_COLUMNS, runValues } from './automation-run-insert';
import type { PgTimestamp } from './pg-types';

/**
 * The automations' outboxes, read by worker/automation-dispatcher.ts:
 * - trigger rows (`contact.created`, `topic.subscribed`) the audience writes become runs;
 * - runs committed with `started_at` null get their workflow started, then marked;
 * - runs with `wake_at` set (an event resumed a wait, a cancel) get a wake signal, then cleared.
 * Starting or signalling twice is harmless (a start of an existing run is a no-op; a wake makes the
 * run read the database), so each step acts first and marks after: a crash in between repeats it.
 */

/**
 * Turns up to `limit` trigger rows into runs and marks them consumed, in one statement: a row is
 * consumed exactly once, whatever process takes it (SKIP LOCKED), and its runs exist iff it is marked.
 * A run needs the automation enabled since before the trigger happened and the contact still
 * there. The dedupe key: `contact.created` (once per contact ever), `trigger:<id>` for a
 * subscription (a contact may subscribe, leave and subscribe again).
 */
export async function consumeTriggers(orm: Orm, limit: number, now: Date): Promise<{ consumed: number; started: number }> {
  const [row] = await orm.em.fork().execute(
    `
with n as (
  select ?::timestamptz as now
), t as (
  select * from automation_triggers where consumed_at is null order by id limit ? for update skip locked
), runs as (
  insert into automation_runs (${RUN_COLUMNS})
  select ${runValues({ id: "md5(a.id::text || ':' || c.id::text || ':' || k.key)::uuid", org: 't.organization_id', a: 'a', contact: 'c.id', email: 'c.email', key: 'k.key', trigger: "jsonb_strip_nulls(jsonb_build_object('type', t.type, 'topic', tp.slug, 'at', t.created_at))", data: "'{}'::jsonb", now: 'n.now' })}
    from t cross join n
    join contacts c on c.id = t.contact_id
    join automations a on a.organization_id = t.organization_id and a.enabled and a.deleted_at is null
     and a.trigger_type = t.type and (t.type = 'contact.created' or a.trigger_topic_id = t.topic_id)
     and a.enabled_since <= t.created_at
    left join topics tp on tp.id = t.topic_id
    cross join lateral (select case when t.type = 'contact.created' then 'contact.created' else 'trigger:' || t.id end as key) k
  on conflict (id) do nothing
  returning 1
), done as (
  update automation_triggers set consumed_at = (select now from n) where id in (select id from t) returning 1
)
select (select count(*)::int from done) as consumed, (select count(*)::int from runs) as started`,
    [now, limit],
  );
  return row as { consumed: number; started: number };
}

/** Consumed trigger rows are kept a while (what fired what, for an operator), then removed. */
export async function purgeConsumedTriggers(orm: Orm, before: Date): Promise<number> {
  const rows = await orm.em.fork().execute('delete from automation_triggers where consumed_at < ? returning 1', [before]);
  return rows.length;
}

/**
 * Runs to start now: committed and never started, or parked and due (oldest first), with the
 * segment each start is. The partial index holds exactly these rows.
 */
export async function unstartedRuns(
  orm: Orm,
  limit: number,
  now: Date,
): Promise<{ id: string; segment: number; organization_id: string }[]> {
  return orm.em.fork().execute(
    `select id, segment, organization_id from automation_runs
      where started_at is null and status in ('running', 'waiting') and coalesce(resume_at, created_at) <= ?
      order by coalesce(resume_at, created_at) limit ?`,
    [now, limit],
  );
}

/** Marks starts done, each for the segment it started (a run that parked again meanwhile waits for its next start). */
export async function markRunsStarted(orm: Orm, started: { id: string; segment: number }[], now: Date): Promise<void> {
  await orm.em.fork().execute(
    `update automation_runs r set started_at = ?
       from jsonb_to_recordset(?::jsonb) as s(id uuid, segment int)
      where r.id = s.id and r.segment = s.segment and r.started_at is null`,
    [now, JSON.stringify(started)],
  );
}

/** Runs to wake, with the mark each was read at (cleared only if no newer wake came meanwhile). */
export async function wokenRuns(
  orm: Orm,
  limit: number,
): Promise<{ id: string; wake_at: PgTimestamp; started: boolean; segment: number }[]> {
  return orm.em
    .fork()
    .execute(
      'select id, wake_at, started_at is not null as started, segment from automation_runs where wake_at is not null order by wake_at limit ?',
      [limit],
    );
}

export async function clearWake(orm: Orm, id: string, seen: PgTimestamp): Promise<void> {
  await orm.em.fork().execute('update automation_runs set wake_at = null where id = ? and wake_at = ?', [id, seen]);
}
