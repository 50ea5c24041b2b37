import type { Orm } from '../db/orm';
import { Email } from '../db/entities';
import type { Clock } from '../core/clock';
import type { DeliverResult } from '../workflows/send-email';
import { PermanentFailure } from './errors';

/**
 * The operator's close: only a message the relay accepted and nothing confirmed since (`sent`)
 * becomes `unconfirmed`; shared by the workflow activity and `svc email close-unconfirmed`.
 */
export async function closeUnconfirmed(orm: Orm, emailId: string, clock: Clock): Promise<DeliverResult> {
  const em = orm.em.fork();
  await em.nativeUpdate(Email, { id: emailId, status: 'sent' }, { status: 'unconfirmed', updatedAt: clock.now() });
  const email = await em.findOne(Email, { id: emailId }, { fields: ['status'] });
  if (!email) throw new PermanentFailure(`email ${emailId} does not exist`);
  return { status: email.status };
}
