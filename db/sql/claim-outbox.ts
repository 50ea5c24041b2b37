import type { EntityManager } from '@mikro-orm/postgresql';
import type { KeyMode, Plan, Stream } from '../entities';

/** A message the outbox claimed, with what its daily allowances depend on. */
export interface OutboxRow {
  id: string;
  mode: KeyMode;
  stream: Stream;
  status: string;
  organization_id: string;
  domain_id: string;
  /** The message's kind (a label of its run: SvcKind in Temporal), if it has one. */
  kind: string | null;
  /** Its subject, its first 200 characters (no more shows): the run's summary in the Temporal UI says what the run delivers. */
  subject: string;
  /** The day whose allowances it already took (a pass that crashed after reserving). */
  reserved_on: string | null;
  plan: Plan;
  daily_send_cap: number | null;
  warmup_stage: number | null;
  warmup_checked_on: string | null;
  /** Times an MX refused it for now (direct delivery): a retry's run is a new run, named apart from the first. */
  deferrals: number;
}

/**
 * Claims up to `limit` messages of one mode and stream that are due (scheduled time, or creation,
 * at or before `now`), oldest due first, FOR UPDATE SKIP LOCKED so several outboxes share the
 * work. Parked messages are not in emails_outbox_idx, so a parked backlog costs these claims
 * nothing; neither does mail scheduled for later (the range scan stops at `now`).
 */
export async function claimOutbox(em: EntityManager, q: { mode: KeyMode; stream: Stream; now: Date; limit: number }): Promise<OutboxRow[]> {
  if (q.limit <= 0) return [];
  return em.getConnection().execute<OutboxRow[]>(
    `
with c as (
  select id from emails
   where enqueued_at is null and waiting_reason is null and mode = ? and stream = ?
     and coalesce(scheduled_at, created_at) <= ?
   order by coalesce(scheduled_at, created_at), id
   limit ?
   for update skip locked
)
select e.id, e.mode, e.stream, e.status, e.organization_id, e.domain_id, e.kind, left(e.subject, 200) as subject, e.reserved_on::text as reserved_on, e.deferrals,
       o.plan, o.daily_send_cap, d.warmup_stage, d.warmup_checked_on::text as warmup_checked_on
  from c join emails e on e.id = c.id
  join organizations o on o.id = e.organization_id
  join domains d on d.id = e.domain_id
 order by coalesce(e.scheduled_at, e.created_at), e.id`,
    [q.mode, q.stream, q.now, q.limit],
    'all',
    em.getTransactionContext(),
  );
}

/** Whether any message of a mode and stream is due and waiting in the outbox (a full queue's check). */
export async function outboxHasDue(em: EntityManager, q: { mode: KeyMode; stream: Stream; now: Date }): Promise<boolean> {
  const rows = await em.getConnection().execute(
    `select 1 from emails where enqueued_at is null and waiting_reason is null and mode = ? and stream = ?
        and coalesce(scheduled_at, created_at) <= ? limit 1`,
    [q.mode, q.stream, q.now],
    'all',
    em.getTransactionContext(),
  );
  return rows.length > 0;
}

/**
 * Marks started messages: they leave the outbox. `runs` (same order as `ids`): the workflow id of
 * each one's run (started_run), so a run an operator terminates before it claimed its messages can
 * be told from one still coming (worker/stranded-runs.ts).
 */
export async function markEnqueued(em: EntityManager, ids: string[], at: Date, runs?: string[]): Promise<void> {
  if (ids.length === 0) return;
  await em.getConnection().execute(
    `update emails e set enqueued_at = ?, started_run = coalesce(u.run, e.started_run)
         from jsonb_to_recordset(?::jsonb) as u(id uuid, run text) where e.id = u.id`,
    // One JSON parameter: MikroORM would inline a JS array as a list of values.
    [at, JSON.stringify(ids.map((id, i) => ({ id, run: runs?.[i] || null })))],
    'run',
    em.getTransactionContext(),
  );
}
