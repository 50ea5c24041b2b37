import * as yup from 'yup';
import { bodySchema } from '../../core/validate';
import { resourceName } from '../validate';

export const createSegmentSchema = bodySchema({
  name: resourceName().required('name is required'),
  // Checked by parseSegmentFilter.
  filter: yup.mixed().required('filter is required'),
});

export type CreateSegmentBody = yup.InferType<typeof createSegmentSchema>;
