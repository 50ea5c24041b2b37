import type { Orm } from '../orm';

/**
 * `svc email unconfirmed` (issue 14): live messages still at `sent` (left the provider, no event
 * since) older than a cutoff, counted or closed as `unconfirmed`. Both walk emails_sent_idx.
 */

export interface UnconfirmedScope {
  cutoff: Date;
  organizationId: string | null;
}

/** How many messages a close would take, and the oldest one's time (a dry run). */
export async function countUnconfirmed(orm: Orm, scope: UnconfirmedScope): Promise<{ count: number; oldestSentAt: Date | null }> {
  const [row] = await orm.em
    .fork()
    .getConnection()
    .execute<{ count: number; oldest: Date | null }[]>(
      `select count(*)::int as count, min(sent_at) as oldest from emails
      where status = 'sent' and sent_at < ? and mode = 'live' and (?::uuid is null or organization_id = ?::uuid)`,
      [scope.cutoff, scope.organizationId, scope.organizationId],
    );
  return { count: row.count, oldestSentAt: row.oldest ? new Date(row.oldest) : null };
}

/**
 * Closes one batch, oldest first, and writes its audit rows (one per organization in the batch,
 * no key: an operator through `svc`) in the same statement. The conditional update settles a
 * race with a late bounce or complaint: whatever moved off `sent` first stays as it is.
 */
export async function closeUnconfirmedBatch(
  orm: Orm,
  scope: UnconfirmedScope & { limit: number },
): Promise<{ id: string; organizationId: string }[]> {
  const rows = await orm.em
    .fork()
    .getConnection()
    .execute<{ id: string; organization_id: string }[]>(
      `
with picked as (
  select id from emails
   where status = 'sent' and sent_at < ? and mode = 'live' and (?::uuid is null or organization_id = ?::uuid)
   order by sent_at, id
   limit ?
   for update skip locked
), closed as (
  update emails e set status = 'unconfirmed', updated_at = now()
    from picked where e.id = picked.id and e.status = 'sent'
  returning e.id, e.organization_id
), audited as (
  insert into audit_log (id, organization_id, api_key_id, action, target_type, target_id, details, created_at)
  select svc_uuidv7(), organization_id, null, 'email.closed_unconfirmed', 'email_batch', min(id::text),
         jsonb_build_object('count', count(*), 'cutoff', ?::timestamptz, 'email_ids', jsonb_agg(id order by id)), now()
    from closed group by organization_id
  returning 1
)
select id, organization_id from closed order by id`,
      [scope.cutoff, scope.organizationId, scope.organizationId, scope.limit, scope.cutoff],
    );
  return rows.map((r) => ({ id: r.id, organizationId: r.organization_id }));
}
