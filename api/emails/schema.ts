import * as yup from 'yup';
import { listQuerySchema } from '../validate';
import { parseTimestamp } from '../../core/time';
import { EMAIL_STATUSES } from '../../core/emails/status';

const timestamp = (name: string) =>
  yup
    .string()
    .test(
      'timestamp',
      `${name} must be an ISO 8601 timestamp between 1970 and 9999, e.g. 2026-01-01T00:00:00Z`,
      (v) => v === undefined || parseTimestamp(v) !== null,
    );

export const listEmailsQuerySchema = listQuerySchema.shape({
  status: yup.string().oneOf(EMAIL_STATUSES),
  to: yup.string().max(254),
  kind: yup.string().max(64),
  mode: yup.string().oneOf(['live', 'test']),
  since: timestamp('since'),
  until: timestamp('until'),
});

export type ListEmailsQuery = yup.InferType<typeof listEmailsQuerySchema>;
