import type { EntityManager } from '@mikro-orm/postgresql';
import { audienceConditions, type AudienceCondition } from './audience-conditions';

export interface FreezeRow {
  status: 'queued' | 'sending' | 'sent' | 'canceled' | 'failed';
  recipients: number | null;
  enqueued: number;
}

/** The broadcast's state, its row locked until the caller's transaction ends (freezing happens once). */
export async function lockBroadcast(em: EntityManager, broadcastId: string): Promise<FreezeRow | null> {
  const [row] = await em.execute<FreezeRow[]>('select status, recipients, enqueued from broadcasts where id = ? for update', [broadcastId]);
  return row ?? null;
}

/**
 * Freezes a broadcast's audience in one statement: the segment's members (its conditions, resolved
 * by the caller) who are `subscribed`, not on the suppression list and, with a topic, whose
 * effective state for it is `subscribed`, numbered from 0 in contact-id order; then the broadcast
 * becomes `sending` with that count. Contacts added later are not members of this broadcast.
 * Run inside the transaction that locked the row (lockBroadcast) and found it `queued`.
 */
export async function freezeAudience(
  em: EntityManager,
  b: { broadcastId: string; organizationId: string; conditions: AudienceCondition[]; topic: AudienceCondition | null; now: Date },
): Promise<number> {
  const params: unknown[] = [b.broadcastId, b.organizationId];
  const where = [
    'c.organization_id = ?',
    "c.status = 'subscribed'",
    'not exists (select 1 from suppressions s where s.organization_id = c.organization_id and s.email = c.email)',
    ...audienceConditions(b.topic ? [...b.conditions, b.topic] : b.conditions, params),
  ];
  params.push(b.now, b.now, b.broadcastId);
  const [row] = await em.execute<{ n: number }[]>(
    `with members as (
       insert into broadcast_recipients (broadcast_id, position, contact_id, email)
       select ?, (row_number() over (order by c.id) - 1)::int, c.id, c.email from contacts c where ${where.join(' and ')}
       returning 1
     ), b as (
       update broadcasts set status = 'sending', recipients = (select count(*) from members), started_at = ?, updated_at = ?
        where id = ? returning recipients
     )
     select recipients as n from b`,
    params,
  );
  return row.n;
}
