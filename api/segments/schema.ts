import * as yup from 'yup';
import { resourceName } from '../validate';

export const createSegmentSchema = yup
  .object({
    name: resourceName().required('name is required'),
    // Checked by parseSegmentFilter.
    filter: yup.mixed().required('filter is required'),
  })
  .noUnknown(({ unknown }) => `unknown field(s): ${unknown}`)
  .strict();

export type CreateSegmentBody = yup.InferType<typeof createSegmentSchema>;
