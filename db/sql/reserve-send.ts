import type { EntityManager } from '@mikro-orm/postgresql';
import type { WaitingReason } from '../entities';

/** The platform's scope id in send_counters. */
export const PLATFORM_SCOPE_ID = '00000000-0000-0000-0000-000000000000';

/** A claimed live message as the reserving statement needs it. */
export interface ChunkMessage {
  id: string;
  organizationId: string;
  domainId: string;
  /** Its organization's and its domain's limit for the day; null: no cap. */
  limits: { organization: number | null; domain: number | null };
  /** The domain's warm-up stage, kept on its counter row for the next day's advance rule. */
  warmupStage: number | null;
}

export interface ChunkInput {
  /** The UTC day (YYYY-MM-DD) and when it ends (a parked message's `until`). */
  day: string;
  until: Date;
  /** The platform's limit; null: no cap, and the platform is not counted at all. */
  platformLimit: number | null;
  /** In claim order: the statement admits them by organization and domain (lock order), each group in this order. */
  messages: ChunkMessage[];
}

/** A message that did not fit; `firstToday`: it reached that cap first today (the counter row's reached_at was still empty). */
export interface ParkedMessage {
  id: string;
  reason: WaitingReason;
  firstToday: boolean;
}

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
 * Reserves a whole chunk of claimed messages in one statement, where it used to take one per
 * message: at hundreds of messages a second those round trips were most of the outbox's cost.
 *
 * The outcome is that of reserving each message in turn. A message counts its recipients still to
 * deliver (not those suppressed at acceptance, nor, on a direct-delivery retry, those delivered
 * before it was deferred); one no longer queued, or already stamped `reserved_on` today
 * (a pass that crashed after reserving), takes nothing and locks nothing. The others are walked
 * in lock order (by organization and domain, each group in the given order) against running
 * totals, because whether a message fits depends on which earlier ones did (a later, smaller
 * message may still fit where an earlier one did not): it either takes from every allowance or
 * from none and is parked behind the first cap in lock order it did not fit. A recursive CTE does
 * that walk, one step per message over arrays built once (not a scan of the chunk per step). In
 * that order each organization and domain is one run, so their running totals are scalars that
 * restart at their counter's value where the run begins; only the platform's spans the chunk.
 *
 * The counter rows are all locked before the walk reads them, in one order for every process
 * (platform, then each organization's row followed by its domains' rows), so concurrent passes
 * queue on a counter but never deadlock; every write below depends on the walk's aggregate, so
 * none runs before the last lock is held. A counter row is updated once (what the chunk takes
 * and whether it reached the cap together: a second update of a row in one statement would be
 * lost). `reached_at` is set only where still empty, so the cap is reported once per day per scope
 * across processes. Counter rows must exist (ensureCounters); a cap of null is not checked.
 * Returns the parked messages; every other one may start.
 */
export async function reserveChunk(em: EntityManager, r: ChunkInput): Promise<ParkedMessage[]> {
  if (r.messages.length === 0) return [];
  const input = r.messages.map((m, ord) => ({
    ord,
    id: m.id,
    org: m.organizationId,
    dom: m.domainId,
    ol: m.limits.organization,
    dl: m.limits.domain,
    stage: m.warmupStage,
  }));
  const rows = await em.getConnection().execute<{ id: string; reason: WaitingReason; first: boolean }[]>(
    `
with recursive p as (
  select ?::date as day, ?::timestamptz as until, ?::int as pl, ?::uuid as platform_id
), input as (
  select x.* from jsonb_to_recordset(?::jsonb) as x(ord int, id uuid, org uuid, dom uuid, ol int, dl int, stage int)
), todo as (
  select i.*, (select count(*)::int from recipients x where x.email_id = i.id and x.state in ('pending', 'in_flight')) as n
    from input i join emails e on e.id = i.id, p
   where e.status = 'queued' and e.reserved_on is distinct from p.day
), scopes as (
  select 'platform' as scope, p.platform_id as scope_id, 0 as k1, null::uuid as k2, 0 as k3
    from p where p.pl is not null and exists (select 1 from todo)
  union
  select 'organization', org, 1, org, 0 from todo
  union
  select 'domain', dom, 1, org, 1 from todo
), locked as (
  select c.scope, c.scope_id, c.used, c.reached_at
    from send_counters c join scopes s on s.scope = c.scope and s.scope_id = c.scope_id, p
   where c.day = p.day
   order by s.k1, s.k2, s.k3, c.scope_id
   for update of c
), seq as (
  select (row_number() over w)::int as k, t.id, t.org, t.dom, t.n, t.ol, t.dl, t.stage,
         t.org is distinct from lag(t.org) over w as fo, t.dom is distinct from lag(t.dom) over w as fd,
         o.used as o0, d.used as d0
    from todo t
    left join locked o on o.scope = 'organization' and o.scope_id = t.org
    left join locked d on d.scope = 'domain' and d.scope_id = t.dom
  window w as (order by t.org, t.dom, t.ord)
), arr as (
  select count(*)::int as m, array_agg(n order by k) as n, array_agg(ol order by k) as ol, array_agg(dl order by k) as dl,
         array_agg(fo order by k) as fo, array_agg(fd order by k) as fd,
         array_agg(o0 order by k) as o0, array_agg(d0 order by k) as d0,
         (select used from locked where scope = 'platform') as p0
    from seq
), walk(k, pu, ou, du, scope) as (
  select 0, arr.p0, null::int, null::int, null::text from arr
  union all
  select w.k + 1, b.pu + case when v.scope is null then b.n else 0 end, b.ou + case when v.scope is null then b.n else 0 end,
         b.du + case when v.scope is null then b.n else 0 end, v.scope
    from walk w
    cross join arr a
    cross join p
    cross join lateral (
      select a.n[w.k + 1] as n, w.pu,
             case when a.fo[w.k + 1] then a.o0[w.k + 1] else w.ou end as ou,
             case when a.fd[w.k + 1] then a.d0[w.k + 1] else w.du end as du,
             a.ol[w.k + 1] as ol, a.dl[w.k + 1] as dl
    ) b
    cross join lateral (
      select case
          when p.pl is not null and b.pu + b.n > p.pl then 'platform'
          when b.ol is not null and b.ou + b.n > b.ol then 'organization'
          when b.dl is not null and b.du + b.n > b.dl then 'domain'
        end as scope
    ) v
   where w.k < a.m
), verdict as (
  select s.k, s.id, s.org, s.dom, s.n, s.stage, w.scope from seq s join walk w on w.k = s.k
), bumps as (
  select 'platform' as scope, p.platform_id as scope_id, sum(v.n)::int as n, null::int as stage
    from verdict v, p where v.scope is null and p.pl is not null group by p.platform_id
  union all
  select 'organization', v.org, sum(v.n)::int, null from verdict v where v.scope is null group by v.org
  union all
  select 'domain', v.dom, sum(v.n)::int, max(v.stage) from verdict v where v.scope is null group by v.dom
), hit as (
  select v.scope, case v.scope when 'platform' then p.platform_id when 'organization' then v.org else v.dom end as scope_id,
         min(v.k) as k
    from verdict v, p where v.scope is not null group by 1, 2
), changes as (
  select coalesce(b.scope, h.scope) as scope, coalesce(b.scope_id, h.scope_id) as scope_id, coalesce(b.n, 0) as n, b.stage,
         b.scope is not null as bumped, h.scope is not null as hit
    from bumps b full join hit h on h.scope = b.scope and h.scope_id = b.scope_id
), counted as (
  update send_counters c
     set used = c.used + x.n,
         warmup_stage = case when x.bumped and c.scope = 'domain' then x.stage else c.warmup_stage end,
         reached_at = case when x.hit then coalesce(c.reached_at, now()) else c.reached_at end
    from changes x, p
   where c.day = p.day and c.scope = x.scope and c.scope_id = x.scope_id
  returning 1
), mark as (
  update emails e
     set reserved_on = case when v.scope is null then p.day else e.reserved_on end,
         waiting_reason = case when v.scope is null then null else v.scope || '_daily_cap' end,
         waiting_until = case when v.scope is null then null else p.until end
    from verdict v, p where e.id = v.id
  returning 1
)
select v.id, v.scope || '_daily_cap' as reason, coalesce(l.scope is not null and l.reached_at is null, false) as first
  from verdict v
  left join hit h on h.k = v.k
  left join locked l on l.scope = h.scope and l.scope_id = h.scope_id
 where v.scope is not null
 order by v.k`,
    [r.day, r.until, r.platformLimit, PLATFORM_SCOPE_ID, JSON.stringify(input)],
    'all',
    em.getTransactionContext(),
  );
  return rows.map((x) => ({ id: x.id, reason: x.reason, firstToday: x.first }));
}
