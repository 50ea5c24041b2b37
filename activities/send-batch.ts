import type { Orm } from '../db/orm';
import { claimForDelivery } from '../db/sql/claim-delivery';
import type { Clock } from '../core/clock';
import { describeFailure } from '../workflows/context';
import type { SendBatchActivities, Unsent } from '../workflows/send-batch';
import type { DeliveryPass } from './delivery-pass';
import { isNonRetryable } from './errors';

/** SendBatch's activities: a chunk of messages claimed by one run, delivered in passes (activities/delivery-pass.ts). */
export function createSendBatchActivities(deps: { orm: Orm; clock: Clock }, pass: DeliveryPass): SendBatchActivities {
  const { orm, clock } = deps;
  return {
    async claimBatch(batchId, emailIds) {
      const rows = await claimForDelivery(orm.em.fork(), { owner: batchId, ids: emailIds, at: clock.now() });
      const claimed = new Set(rows.filter((r) => r.outcome === 'claimed').map((r) => r.id));
      return emailIds.filter((id) => claimed.has(id));
    },

    async deliverBatch(emailIds, batchId) {
      // What a message's pass threw goes back in the answer: the body retries what the relay
      // refused for now on its own backoff; only trouble with the pass itself is thrown.
      const retry: Unsent[] = [];
      const failed: Unsent[] = [];
      for (const r of await pass.deliverMany(emailIds, batchId)) {
        if (r.error === undefined) continue;
        (isNonRetryable(r.error) ? failed : retry).push({ id: r.id, detail: describeFailure(r.error) });
      }
      return { retry, failed };
    },

    async failBatch(items) {
      // A message gone meanwhile has nothing left to fail.
      await pass.failMany(items);
    },
  };
}
