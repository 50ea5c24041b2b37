import type { Orm } from '../orm';
import type { PgTimestamp } from './pg-types';

/**
 * `svc email unconfirmed` (issue 14) and the console's Unconfirmed page (issue 38): live messages
 * still at `sent` (left the provider, no event since) older than a cutoff, counted, listed or
 * closed as `unconfirmed`. All walk emails_sent_idx (the console's close, the primary key).
 */

export interface UnconfirmedScope {
  cutoff: Date;
  organizationId: string | null;
}

/**
 * The audit rows of a close, in its statement: one per organization of the messages `closed`
 * (a CTE before it), no key; its two parameters are the actor (null: an operator through `svc`;
 * `console:<email>` through the console) and the cutoff.
 */
const AUDITED = `audited as (
  insert into audit_log (id, organization_id, api_key_id, actor, action, target_type, target_id, details, created_at)
  select svc_uuidv7(), organization_id, null, ?::text, 'email.closed_unconfirmed', 'email_batch', min(id::text),
         jsonb_build_object('count', count(*), 'cutoff', ?::timestamptz, 'email_ids', jsonb_agg(id order by id)), now()
    from closed group by organization_id
  returning 1
)`;

/**
 * A close's end, after a `picked` CTE of locked message ids: those still at `sent` become
 * `unconfirmed` (a late bounce or complaint that moved one off `sent` first wins), with the audit
 * rows (AUDITED's two parameters); the statement answers the closed ids and organizations.
 */
const CLOSE_PICKED = `closed as (
  update emails e set status = 'unconfirmed', updated_at = now()
    from picked where e.id = picked.id and e.status = 'sent'
  returning e.id, e.organization_id
), ${AUDITED}
select id, organization_id from closed order by id`;

/** How many messages a close would take, and the oldest one's time (a dry run). */
export async function countUnconfirmed(orm: Orm, scope: UnconfirmedScope): Promise<{ count: number; oldestSentAt: Date | null }> {
  const [row] = await orm.em
    .fork()
    .getConnection()
    .execute<{ count: number; oldest: PgTimestamp | null }[]>(
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
), ${CLOSE_PICKED}`,
      [scope.cutoff, scope.organizationId, scope.organizationId, scope.limit, null, scope.cutoff],
    );
  return rows.map((r) => ({ id: r.id, organizationId: r.organization_id }));
}

export interface UnconfirmedRow {
  id: string;
  organization_id: string;
  organization_name: string;
  subject: string;
  to_addresses: string[];
  sent_at: PgTimestamp;
}

/**
 * The console's list (issue 38): the messages a close would take, oldest first, `limit` + 1 rows
 * (one more: a next page) after the keyset position `after` (sent_at, id), on emails_sent_idx.
 */
export function listUnconfirmed(
  orm: Orm,
  scope: UnconfirmedScope & { limit: number; after?: { sentAt: Date; id: string } },
): Promise<UnconfirmedRow[]> {
  const after = scope.after ? 'and (e.sent_at, e.id) > (?::timestamptz, ?::uuid)' : '';
  return orm.em
    .fork()
    .getConnection()
    .execute<UnconfirmedRow[]>(
      `select e.id, e.organization_id, o.name as organization_name, e.subject, e.to_addresses, e.sent_at
         from emails e join organizations o on o.id = e.organization_id
        where e.status = 'sent' and e.sent_at < ? and e.mode = 'live' and (?::uuid is null or e.organization_id = ?::uuid) ${after}
        order by e.sent_at, e.id
        limit ?`,
      [
        scope.cutoff,
        scope.organizationId,
        scope.organizationId,
        ...(scope.after ? [scope.after.sentAt, scope.after.id] : []),
        Math.trunc(scope.limit) + 1,
      ],
    );
}

/**
 * The console's close (issue 38): exactly the messages named, of those still live at `sent` past
 * the cutoff (and of the organization, when one is named), in one statement with their audit
 * rows naming `actor`, like a batch of `svc email unconfirmed --close`. A message a late event
 * holds or moved off `sent` is left as it is.
 */
export async function closeUnconfirmedIds(
  orm: Orm,
  scope: UnconfirmedScope & { ids: string[]; actor: string },
): Promise<{ id: string; organizationId: string }[]> {
  if (scope.ids.length === 0) return [];
  const rows = await orm.em
    .fork()
    .getConnection()
    .execute<{ id: string; organization_id: string }[]>(
      `
with picked as (
  select id from emails
   where id = any(?::uuid[]) and status = 'sent' and sent_at < ? and mode = 'live' and (?::uuid is null or organization_id = ?::uuid)
   order by id
   for update skip locked
), ${CLOSE_PICKED}`,
      [`{${scope.ids.join(',')}}`, scope.cutoff, scope.organizationId, scope.organizationId, scope.actor, scope.cutoff],
    );
  return rows.map((r) => ({ id: r.id, organizationId: r.organization_id }));
}
