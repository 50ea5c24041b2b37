import * as yup from 'yup';
import { bodySchema } from '../../core/validate';
import { listQuerySchema } from '../validate';

/** PATCH /automations/:id: only the switch (a definition change is a PUT, a new version). */
export const patchAutomationSchema = bodySchema({
  enabled: yup.boolean().strict().required('enabled is required'),
});

export const RUN_STATUSES = ['running', 'waiting', 'completed', 'canceled', 'failed'] as const;

export const listRunsQuerySchema = listQuerySchema.shape({
  status: yup.string().oneOf(RUN_STATUSES, `status must be one of: ${RUN_STATUSES.join(', ')}`),
});
