import type { Orm } from '../orm';
import type { AutomationRunStatus, ContactStatus } from '../entities';
import { effectiveState, topicsWithRows } from './topic-state';

/**
 * The state changes of one automation run, as its activities make them (activities/automation-run.ts).
 * Every write is conditional on the run still being `running` or `waiting`: a cancel committed
 * meanwhile wins, and the activity reports it instead of going on. History is a JSON array of
 * `{step, type, started_at, finished_at, result}`, appended as steps begin and completed in place.
 */

export interface RunForStep {
  id: string;
  organization_id: string;
  automation_id: string;
  status: AutomationRunStatus;
  data: Record<string, unknown>;
  resumed: Record<string, unknown> | null;
  /** Starts so far after parks (0: the first); with `resume_path`, the delay that parked it last. */
  segment: number;
  resume_path: string | null;
  definition: { steps: unknown[] };
  /** The key that wrote the run's version: its sends are stored as that key's. */
  api_key_id: string;
  contact_id: string;
  /** The contact now; null when it was deleted. */
  contact: {
    id: string;
    email: string;
    first_name: string | null;
    last_name: string | null;
    status: ContactStatus;
    properties: Record<string, unknown>;
  } | null;
}

export async function readRunForStep(orm: Orm, runId: string): Promise<RunForStep | null> {
  const [row] = await orm.em.fork().execute(
    `select r.id, r.organization_id, r.automation_id, r.status, r.data, r.resumed, r.segment, r.resume_path, v.definition, v.api_key_id, r.contact_id,
            case when c.id is null then null else jsonb_build_object('id', c.id, 'email', c.email, 'first_name', c.first_name,
              'last_name', c.last_name, 'status', c.status, 'properties', c.properties) end as contact
       from automation_runs r
       join automation_versions v on v.automation_id = r.automation_id and v.version = r.version
       left join contacts c on c.id = r.contact_id and c.organization_id = r.organization_id
      where r.id = ?`,
    [runId],
  );
  return (row as RunForStep | undefined) ?? null;
}

export interface StepWrite {
  path: string;
  /** Appended to the history (a step beginning, or a step done at once). */
  entry?: Record<string, unknown>;
  /** Completes the last history entry with this result. */
  finish?: Record<string, unknown>;
  status?: 'running' | 'waiting';
  /** wait_for_event: what resumes the run and until when (null: the wait is over). */
  wait?: { event: string; deadline: Date } | null;
  now: Date;
}

/** Applies one step's change if the run is still going; answers the run's status either way (null: no such run). */
export async function writeStep(orm: Orm, runId: string, w: StepWrite): Promise<{ applied: boolean; status: AutomationRunStatus } | null> {
  const params: unknown[] = [w.path];
  let history = 'history';
  if (w.finish) {
    history = `jsonb_set(history, array[(jsonb_array_length(history) - 1)::text],
      history -> (jsonb_array_length(history) - 1) || jsonb_build_object('finished_at', to_char(?::timestamptz at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'result', ?::jsonb))`;
    params.push(w.now, JSON.stringify(w.finish));
  }
  if (w.entry && w.finish) throw new Error('a step write appends an entry or completes the last one, not both');
  if (w.entry) {
    // A path occurs once in a run (steps never repeat), so an activity retried after its write
    // committed finds its entry and appends nothing.
    history = `case when history @> ?::jsonb then history else history || ?::jsonb end`;
    params.push(JSON.stringify([{ step: w.path }]), JSON.stringify([w.entry]));
  }
  let set = `step = ?, history = ${history}`;
  if (w.status) {
    set += `, status = ?`;
    params.push(w.status);
  }
  if (w.wait) {
    set += `, waiting_event = ?, wait_deadline = ?, resumed = null`;
    params.push(w.wait.event, w.wait.deadline);
  } else if (w.wait === null) {
    // `resumed` stays until the next wait begins: an endWait retried after its write committed
    // still sees the event that ended the wait.
    set += `, waiting_event = null, wait_deadline = null`;
  }
  params.push(w.now, runId);
  const em = orm.em.fork();
  const updated = await em.execute(
    `update automation_runs set ${set}, updated_at = ? where id = ? and status in ('running', 'waiting') returning status`,
    params,
  );
  if (updated.length) return { applied: true, status: updated[0].status };
  const [row] = await em.execute('select status from automation_runs where id = ?', [runId]);
  return row ? { applied: false, status: row.status } : null;
}

/**
 * Parks a run in a long delay: its entry in the history, `resume_at`, the next segment, and
 * `started_at` cleared so the dispatcher starts that segment when the delay is over. Once per
 * path (a retry after the commit changes nothing); answers whether the run is parked at `path`.
 */
export async function parkRun(
  orm: Orm,
  runId: string,
  w: { path: string; until: Date; entry: Record<string, unknown>; now: Date },
): Promise<{ parked: boolean; status: AutomationRunStatus } | null> {
  const em = orm.em.fork();
  const updated = await em.execute(
    `update automation_runs
        set step = ?, history = case when history @> ?::jsonb then history else history || ?::jsonb end,
            resume_at = ?, resume_path = ?, segment = segment + 1, started_at = null, updated_at = ?
      where id = ? and status = 'running' and resume_path is distinct from ?
      returning status`,
    [w.path, JSON.stringify([{ step: w.path }]), JSON.stringify([w.entry]), w.until, w.path, w.now, runId, w.path],
  );
  if (updated.length) return { parked: true, status: 'running' };
  // Not written: parked here already (a retry after the commit), or the run ended meanwhile.
  const [row] = await em.execute('select status, resume_path from automation_runs where id = ?', [runId]);
  if (!row) return null;
  return { parked: row.resume_path === w.path && row.status === 'running', status: row.status };
}

/** The run's final state; a run that already ended (canceled) keeps its own. */
export async function finishRun(
  orm: Orm,
  runId: string,
  status: 'completed' | 'canceled' | 'failed',
  reason: string | null,
  now: Date,
): Promise<void> {
  await orm.em.fork().execute(
    `update automation_runs set status = ?, reason = ?, step = null, waiting_event = null, wait_deadline = null, finished_at = ?, updated_at = ?
        where id = ? and status in ('running', 'waiting')`,
    [status, reason, now, now, runId],
  );
}

/**
 * Cancels runs still going, each woken so a sleeping run ends now (one run, or every run of an
 * automation when it is deleted). Answers the ids it canceled.
 */
export async function cancelRuns(orm: Orm, where: { runId: string } | { automationId: string }, now: Date): Promise<string[]> {
  const [column, value] = 'runId' in where ? ['id', where.runId] : ['automation_id', where.automationId];
  const rows = await orm.em.fork().execute(
    `update automation_runs set status = 'canceled', reason = 'canceled', finished_at = ?, updated_at = ?, wake_at = ?,
            waiting_event = null, wait_deadline = null, resume_at = null
      where ${column} = ? and status in ('running', 'waiting') returning id`,
    [now, now, now, value],
  );
  return (rows as { id: string }[]).map((r) => r.id);
}

/** A contact's effective state for a topic (db/sql/topic-state.ts); null when the topic is gone. */
export async function topicStateOf(
  orm: Orm,
  organizationId: string,
  contactId: string,
  slug: string,
): Promise<'subscribed' | 'unsubscribed' | null> {
  const [row] = await orm.em.fork().execute(
    `select ${effectiveState('t.default_opt_in', 's.state')} as state
       from ${topicsWithRows('?')}
      where t.organization_id = ? and t.slug = ?`,
    [contactId, organizationId, slug],
  );
  return row ? row.state : null;
}

/** Merges properties into a contact (null deletes), as the contact rules do; false when the contact is gone. */
export async function mergeContactProperties(
  orm: Orm,
  contactId: string,
  set: Record<string, unknown>,
  remove: string[],
  now: Date,
): Promise<boolean> {
  // Merged in the update itself, so a concurrent write to the row is merged into, not overwritten:
  // after waiting on its lock the update reads the row as that write left it.
  const merged = `(properties || ?::jsonb) - array(select jsonb_array_elements_text(?::jsonb))`;
  const rows = await orm.em
    .fork()
    .execute(
      `update contacts set properties = ${merged}, updated_at = ? where id = ? and ${merged} is distinct from properties returning id`,
      [JSON.stringify(set), JSON.stringify(remove), now, contactId, JSON.stringify(set), JSON.stringify(remove)],
    );
  if (rows.length) return true;
  const [exists] = await orm.em.fork().execute('select 1 from contacts where id = ?', [contactId]);
  return exists !== undefined;
}
