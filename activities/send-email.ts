import type { Logger } from 'pino';
import type { Orm } from '../db/orm';
import { Email } from '../db/entities';
import { claimForDelivery } from '../db/sql/claim-delivery';
import { handBackScheduled } from '../db/sql/scheduled-timers';
import { cancelEmailForOperator } from '../db/sql/cancel-emails';
import type { Clock } from '../core/clock';
import type { SendEmailActivities } from '../workflows/send-email';
import type { DeliveryPass } from './delivery-pass';
import { PermanentFailure } from './errors';
import { closeUnconfirmed } from './unconfirmed';

/** SendEmail's activities: one message, its delivery a pass of one (activities/delivery-pass.ts). */
export function createSendEmailActivities(deps: { orm: Orm; clock: Clock; log?: Logger }, pass: DeliveryPass): SendEmailActivities {
  const { orm, clock } = deps;
  return {
    async loadForSend(emailId) {
      const em = orm.em.fork();
      const email = await em.findOne(Email, { id: emailId }, { fields: ['status', 'scheduledAt'] });
      if (!email) throw new PermanentFailure(`email ${emailId} does not exist`);
      return { status: email.status, scheduledAtMs: email.scheduledAt ? email.scheduledAt.getTime() : null };
    },

    async handBack(emailId) {
      const status = await handBackScheduled(orm.em.fork(), emailId);
      if (status === null) throw new PermanentFailure(`email ${emailId} does not exist`);
      return { status };
    },

    async claimForDelivery(emailId) {
      // The workflow id is the email id: the only run that can own it.
      const [row] = await claimForDelivery(orm.em.fork(), { owner: emailId, ids: [emailId], at: clock.now(), acceptUnowned: true });
      if (!row) throw new PermanentFailure(`email ${emailId} does not exist`);
      return row.outcome === 'claimed' ? { outcome: 'claimed' } : { outcome: 'not_queued', status: row.outcome };
    },

    async deliver(emailId) {
      const [r] = await pass.deliverMany([emailId], emailId);
      if (r.error !== undefined) throw r.error;
      return { status: r.status };
    },

    async failDelivery(emailId, detail) {
      const [r] = await pass.failMany([{ id: emailId, detail }]);
      if (r.error !== undefined) throw r.error;
      return { status: r.status };
    },

    async closeUnconfirmed(emailId) {
      return closeUnconfirmed(orm, emailId, clock);
    },

    async cancelForOperator(emailId) {
      const r = await cancelEmailForOperator(orm, { id: emailId, now: clock.now() });
      deps.log?.info({ emailId, canceled: r.canceled, status: r.status }, "operator canceled the message's run");
      return r;
    },
  };
}
