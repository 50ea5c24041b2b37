import * as yup from 'yup';
import { listQuerySchema } from '../validate';
import { CONTACT_STATUSES, SUBSCRIPTION_STATES } from '../../core/contacts/rules';

export const listContactsQuerySchema = listQuerySchema.shape({
  status: yup.string().oneOf(CONTACT_STATUSES, `status must be one of: ${CONTACT_STATUSES.join(', ')}`),
  topic: yup.string().max(200),
  /** The effective state for `topic`; both or neither. */
  state: yup.string().oneOf(SUBSCRIPTION_STATES, `state must be one of: ${SUBSCRIPTION_STATES.join(', ')}`),
  segment_id: yup.string().max(64),
  /** Start of the address, any case. */
  email: yup.string().max(320),
});

export type ListContactsQuery = yup.InferType<typeof listContactsQuerySchema>;
