import * as yup from 'yup';
import { bodySchema, NO_LINE_BREAKS } from '../../core/validate';
import { address, bodyPart, kindField, scheduledAtField } from '../../core/emails/schema';

/**
 * POST /broadcasts (issue 18): a segment, a sender, and either subject + html/text or a published
 * template (rendered per recipient from the contact's data, so no `data` here).
 */
export const createBroadcastSchema = bodySchema({
  segment_id: yup.string().strict().required().max(64),
  from: address().required(),
  name: yup.string().strict().trim().min(1).max(200).matches(NO_LINE_BREAKS, 'name must not contain line breaks'),
  topic: yup.string().strict().min(1).max(64),
  kind: kindField(),
  subject: yup.string().strict().min(1).max(998).matches(NO_LINE_BREAKS, 'subject must not contain line breaks'),
  html: bodyPart('html'),
  text: bodyPart('text'),
  template: yup.mixed(),
  scheduled_at: scheduledAtField(),
});

export type CreateBroadcastBody = yup.InferType<typeof createBroadcastSchema>;
