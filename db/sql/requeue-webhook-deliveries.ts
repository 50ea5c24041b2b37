import type { EntityManager } from '@mikro-orm/postgresql';

export interface Requeued {
  id: string;
  /** The run it had: a run still waiting under that number is woken so it stops. */
  previous_run: number;
}

/**
 * Starts the next run of deliveries (manual retry of one, or `recover` of every failed one since
 * a time): pending again, due now, not started, and dispatchers of every process notified. The
 * run number goes up, so a run of the old number still waiting stops at its next attempt.
 */
export function requeueWebhookDeliveries(
  em: EntityManager,
  where: { endpointId: string; organizationId: string } & ({ deliveryId: string } | { failedSince: Date }),
): Promise<Requeued[]> {
  const [filter, value] =
    'deliveryId' in where ? ['id = ?', where.deliveryId] : [`status = 'failed' and created_at >= ?`, where.failedSince];
  return em.execute<Requeued[]>(
    `with u as (
       update webhook_deliveries set run = run + 1, run_attempts = 0, status = 'pending', next_attempt_at = now(), enqueued_at = null, updated_at = now()
        where endpoint_id = ? and organization_id = ? and ${filter}
       returning id, run - 1 as previous_run
     )
     select u.id, u.previous_run, pg_notify('svc_webhooks', '') from u`,
    [where.endpointId, where.organizationId, value],
  );
}
