import * as yup from 'yup';
import { bodySchema } from '../../core/validate';
import { resourceName } from '../validate';

export const updateOrganizationSchema = bodySchema({
  name: resourceName(),
  // Printed in the legal footer of bulk mail; several lines are allowed.
  postal_address: yup.string().strict().trim().min(1).max(500).nullable(),
  daily_send_cap: yup.number().strict().integer('daily_send_cap must be an integer').min(0).max(1_000_000_000).nullable(),
});

export type UpdateOrganizationBody = yup.InferType<typeof updateOrganizationSchema>;
