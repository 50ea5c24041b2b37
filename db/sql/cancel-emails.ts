import type { Orm } from '../orm';
import { runPrepared, type PreparedStatement } from '../prepared';
import { eventType, insertEvents } from './email-events';

/**
 * How queued messages are canceled, once, for every canceler (POST /emails/:id/cancel here, a
 * broadcast's cancel in db/sql/cancel-broadcast.ts): the conditional update the worker's pick-up
 * races (only `queued` changes, so exactly one of cancel and pick-up wins), clearing what the
 * message waited for (a cap, a retry), and a `canceled` event for each recipient still due, which
 * the events' trigger turns into an `email.canceled` webhook (issue 51: a cancel left no trace on
 * the message and fired nothing).
 *
 * Three CTEs to put after `with` and before the statement's select: `cancel_target` (the rows
 * `where` names in `emails e`, locked, each with its status as it stands once the lock is had: a
 * pick-up that committed meanwhile shows as `sending`), `canceled` (those that were `queued`, now
 * canceled: `id`, and `enqueued_at`, set once the outbox started its run) and `canceled_events`. `now` is the SQL of the time (a parameter).
 */
export const cancelQueued = (where: string, now: string) => `cancel_target as (
  select e.id, e.status from emails e where ${where} for update
), canceled as (
  update emails e set status = 'canceled', waiting_reason = null, waiting_until = null, retry_reason = null, retry_at = null,
         updated_at = ${now}
    from cancel_target t
   where e.id = t.id and t.status = 'queued'
  returning e.id, e.organization_id, e.enqueued_at
), canceled_events as (
  ${insertEvents(
    { emailId: 'c.id', organizationId: 'c.organization_id', type: eventType('canceled'), recipient: 'r.address', at: now },
    `from canceled c join recipients r on r.email_id = c.id where r.state in ('pending', 'in_flight') order by c.id, r.id returning 1`,
  )}
)`;

const CANCEL_EMAIL: PreparedStatement = {
  name: 'cancel_email_v2',
  text: `
with ${cancelQueued('e.id = $1 and e.organization_id = $2 and ($3::uuid[] is null or e.domain_id = any($3::uuid[]))', '$4::timestamptz')}
select exists (select 1 from canceled) as canceled,
       case when exists (select 1 from canceled) then 'canceled' else (select status from cancel_target) end as status,
       exists (select 1 from canceled where enqueued_at is not null) as started`,
};

/**
 * Cancels one message of the organization (within `domainIds` for a restricted key) while it is
 * queued. Answers whether it did, the message's status now (null: no such message in scope), and
 * whether its run had started (a canceled message whose run waits on a timer is signaled).
 */
export async function cancelEmail(
  orm: Orm,
  q: { id: string; organizationId: string; domainIds: string[] | null; now: Date },
): Promise<{ canceled: boolean; status: string | null; started: boolean }> {
  const [row] = await runPrepared<{ canceled: boolean; status: string | null; started: boolean }>(orm, CANCEL_EMAIL, [
    q.id,
    q.organizationId,
    q.domainIds,
    q.now,
  ]);
  return row;
}

const CANCEL_EMAIL_FOR_OPERATOR: PreparedStatement = {
  name: 'cancel_email_for_operator_v1',
  text: `
with ${cancelQueued('e.id = $1', '$2::timestamptz')}
select exists (select 1 from canceled) as canceled,
       case when exists (select 1 from canceled) then 'canceled' else (select status from cancel_target) end as status`,
};

/**
 * Cancels a message by id alone, while it is queued: an operator canceled its run in the engine's
 * UI (workflows/temporal/binding.ts), which names the run, not an organization. Same statement
 * and trace as the API's cancel; status null: no such message.
 */
export async function cancelEmailForOperator(
  orm: Orm,
  q: { id: string; now: Date },
): Promise<{ canceled: boolean; status: string | null }> {
  const [row] = await runPrepared<{ canceled: boolean; status: string | null }>(orm, CANCEL_EMAIL_FOR_OPERATOR, [q.id, q.now]);
  return row;
}
