import type { EntityManager } from '@mikro-orm/postgresql';

/** A domain's last day with reserved mail before `before`, and the feedback on that day's mail. */
export interface LastSendingDay {
  day: string;
  sent: number;
  stage: number;
  hard_bounces: number;
  complaints: number;
}

export async function lastSendingDay(em: EntityManager, domainId: string, before: string): Promise<LastSendingDay | null> {
  const [row] = await em.getConnection().execute<LastSendingDay[]>(
    `
with d as (
  select day, used, warmup_stage from send_counters
   where scope = 'domain' and scope_id = ? and day < ?::date and used > 0 and warmup_stage is not null
   order by day desc limit 1
)
select d.day::text as day, d.used as sent, d.warmup_stage as stage,
       (select count(*)::int from emails e join email_events ev on ev.email_id = e.id
         where e.domain_id = ? and e.reserved_on = d.day and ev.type = 'bounced' and ev.bounce_type = 'hard') as hard_bounces,
       (select count(*)::int from emails e join email_events ev on ev.email_id = e.id
         where e.domain_id = ? and e.reserved_on = d.day and ev.type = 'complained') as complaints
  from d`,
    [domainId, before, domainId, domainId],
    'all',
    em.getTransactionContext(),
  );
  return row ?? null;
}

/**
 * Records that the advance rule ran for a domain today, moving it to `stage` (the same stage when
 * it does not advance). Conditional on the stage it was decided from and on not having run today,
 * so concurrent outboxes advance a domain once. Returns the stage now in force, or null when
 * another process ran it first (the caller reads the stage again).
 */
export async function recordWarmupCheck(
  em: EntityManager,
  q: { domainId: string; day: string; fromStage: number; stage: number },
): Promise<boolean> {
  const rows = await em.getConnection().execute(
    `update domains set warmup_stage = ?, warmup_checked_on = ?::date
      where id = ? and warmup_stage = ? and warmup_checked_on is distinct from ?::date
      returning 1`,
    [q.stage, q.day, q.domainId, q.fromStage, q.day],
    'all',
    em.getTransactionContext(),
  );
  return rows.length > 0;
}

/** The domain's stage now (after another process's check). */
export async function currentWarmupStage(em: EntityManager, domainId: string): Promise<number | null> {
  const [row] = await em
    .getConnection()
    .execute<{ warmup_stage: number | null }[]>(
      `select warmup_stage from domains where id = ?`,
      [domainId],
      'all',
      em.getTransactionContext(),
    );
  return row?.warmup_stage ?? null;
}
