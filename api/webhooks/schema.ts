import * as yup from 'yup';
import { NO_LINE_BREAKS, bodySchema } from '../../core/validate';
import { parseTimestamp } from '../../core/time';
import { isWebhookEvent, WEBHOOK_EVENTS } from '../../core/webhooks/events';
import { listQuerySchema } from '../validate';

const url = yup
  .string()
  .strict()
  .max(2048, 'url must be at most 2048 characters')
  .matches(NO_LINE_BREAKS, 'url must not contain line breaks');

/** Event names; null (or omitted at creation) means every event. */
const events = yup
  .array()
  .strict()
  .of(
    yup
      .string()
      .strict()
      .required()
      .test(
        'known',
        (v) => `${v.value} is not a webhook event`,
        (v) => isWebhookEvent(v),
      ),
  )
  .min(1, 'events must name at least one event; omit it (or pass null) for all events')
  .max(WEBHOOK_EVENTS.length)
  .nullable()
  .test('unique', 'events must not repeat a name', (v) => !v || new Set(v).size === v.length);

const description = yup
  .string()
  .strict()
  .max(500, 'description must be at most 500 characters')
  .matches(NO_LINE_BREAKS, 'description must not contain line breaks')
  .nullable();

export const createWebhookSchema = bodySchema({ url: url.required('url is required'), events, description });
export const updateWebhookSchema = bodySchema({ url, events, description, enabled: yup.boolean().strict() });
export const recoverSchema = bodySchema({
  since: yup
    .string()
    .strict()
    .required('since is required')
    .test('timestamp', 'since must be an ISO 8601 timestamp, e.g. 2026-01-01T09:00:00Z', (v) => parseTimestamp(v) !== null),
});

export const deliveriesQuerySchema = listQuerySchema.shape({
  status: yup.string().oneOf(['pending', 'succeeded', 'failed'], 'status must be pending, succeeded or failed'),
});

export type CreateWebhookBody = yup.InferType<typeof createWebhookSchema>;
export type UpdateWebhookBody = yup.InferType<typeof updateWebhookSchema>;
