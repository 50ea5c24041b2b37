import type { EntityManager } from '@mikro-orm/postgresql';
import type { WaitingReason } from '../entities';

/** The platform's scope id in send_counters. */
export const PLATFORM_SCOPE_ID = '00000000-0000-0000-0000-000000000000';

export interface ReserveInput {
  emailId: string;
  organizationId: string;
  domainId: string;
  /** The UTC day (YYYY-MM-DD) and when it ends (a parked message's `until`). */
  day: string;
  until: Date;
  /** Each scope's limit for the day; null: no cap (and for the platform: not counted at all). */
  limits: { platform: number | null; organization: number | null; domain: number | null };
  /** The domain's warm-up stage, kept on its counter row for the next day's advance rule. */
  warmupStage: number | null;
}

export type ReserveResult =
  /** Took its recipients from every allowance (or had taken them before: `n` is then 0). */
  | { outcome: 'reserved'; n: number }
  /** Parked behind the first cap (in lock order) it did not fit; `firstToday`: this message reached that cap first today. */
  | { outcome: 'parked'; reason: WaitingReason; firstToday: boolean }
  /** No longer queued (canceled meanwhile): nothing taken. */
  | { outcome: 'not_queued' };

/**
 * Counter rows of the day for a message's scopes, created empty when missing (their own
 * statement: rows made inside the reserving statement would be invisible to its lock step).
 * Rows that exist are filtered out before the insert: a conflict check on a row another
 * transaction has updated would wait for that one to commit.
 */
export async function ensureCounters(
  em: EntityManager,
  rows: { scope: string; scopeId: string; day: string; stage: number | null }[],
): Promise<void> {
  if (rows.length === 0) return;
  await em.getConnection().execute(
    `insert into send_counters (scope, scope_id, day, used, warmup_stage)
     select x.scope, x.scope_id, x.day, 0, x.stage
       from jsonb_to_recordset(?::jsonb) as x(scope text, scope_id uuid, day date, stage int)
      where not exists (select 1 from send_counters c where c.scope = x.scope and c.scope_id = x.scope_id and c.day = x.day)
      order by x.scope, x.scope_id
     on conflict (scope, scope_id, day) do nothing`,
    [JSON.stringify(rows.map((r) => ({ scope: r.scope, scope_id: r.scopeId, day: r.day, stage: r.stage })))],
    'run',
    em.getTransactionContext(),
  );
}

/**
 * Reserves one message's recipients (each counts one; addresses suppressed at acceptance do
 * not) against the day's three allowances in one statement: it locks the counter rows platform →
 * organization → domain (one order for every process, so no deadlock), compares each with its
 * limit and either bumps all of them and stamps the message `reserved_on`, or bumps none and
 * parks the message with the first cap it did not fit (`waiting_reason`, `waiting_until`). A
 * message already stamped for this day takes nothing again. Counter rows must exist
 * (ensureCounters); a cap of null is not checked, and the platform is not counted without a cap.
 */
export async function reserveSend(em: EntityManager, r: ReserveInput): Promise<ReserveResult> {
  const { platform: pl, organization: ol, domain: dl } = r.limits;
  const [row] = await em
    .getConnection()
    .execute<{ status: string | null; reserved_on: string | null; n: number; reason: WaitingReason | null; first: boolean }[]>(
      `
with msg as (
  select e.id, e.status, e.reserved_on::text as reserved_on,
         (select count(*)::int from recipients x where x.email_id = e.id and x.state <> 'suppressed') as n
    from emails e where e.id = ?
), todo as (
  select * from msg where status = 'queued' and reserved_on is distinct from ?
), locked as (
  select c.scope, c.scope_id, c.used, c.reached_at
    from send_counters c, todo
   where c.day = ?::date and (
         (c.scope = 'platform' and c.scope_id = ?::uuid and ?::int is not null)
      or (c.scope = 'organization' and c.scope_id = ?::uuid)
      or (c.scope = 'domain' and c.scope_id = ?::uuid))
   order by case c.scope when 'platform' then 1 when 'organization' then 2 else 3 end
   for update of c
), verdict as (
  select todo.id, todo.n, case
      when ?::int is not null and (select used from locked where scope = 'platform') + todo.n > ?::int then 'platform'
      when ?::int is not null and (select used from locked where scope = 'organization') + todo.n > ?::int then 'organization'
      when ?::int is not null and (select used from locked where scope = 'domain') + todo.n > ?::int then 'domain'
    end as scope
    from todo
), bump as (
  update send_counters c set used = c.used + v.n, warmup_stage = case when c.scope = 'domain' then ?::int else c.warmup_stage end
    from verdict v, locked l
   where v.scope is null and c.day = ?::date and c.scope = l.scope and c.scope_id = l.scope_id
  returning 1
), reached as (
  update send_counters c set reached_at = now()
    from verdict v, locked l
   where v.scope is not null and c.day = ?::date and c.scope = v.scope and l.scope = v.scope
     and c.scope_id = l.scope_id and c.reached_at is null
  returning 1
), mark as (
  update emails e
     set reserved_on = case when v.scope is null then ?::date else e.reserved_on end,
         waiting_reason = case when v.scope is null then null else v.scope || '_daily_cap' end,
         waiting_until = case when v.scope is null then null else ?::timestamptz end
    from verdict v where e.id = v.id
  returning 1
)
select msg.status, msg.reserved_on, coalesce(v.n, 0) as n,
       case when v.scope is null then null else v.scope || '_daily_cap' end as reason,
       exists (select 1 from reached) as first
  from msg left join verdict v on v.id = msg.id`,
      [
        r.emailId,
        r.day,
        r.day,
        PLATFORM_SCOPE_ID,
        pl,
        r.organizationId,
        r.domainId,
        pl,
        pl,
        ol,
        ol,
        dl,
        dl,
        r.warmupStage,
        r.day,
        r.day,
        r.day,
        r.until,
      ],
      'all',
      em.getTransactionContext(),
    );
  if (!row || row.status !== 'queued') return { outcome: 'not_queued' };
  if (row.reason) return { outcome: 'parked', reason: row.reason, firstToday: row.first };
  return { outcome: 'reserved', n: row.reserved_on === r.day ? 0 : row.n };
}
