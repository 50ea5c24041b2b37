import * as yup from 'yup';

const NO_LINE_BREAKS = /^[^\r\n]*$/;

export const createSegmentSchema = yup
  .object({
    name: yup
      .string()
      .strict()
      .trim()
      .required('name is required')
      .min(1)
      .max(200)
      .matches(NO_LINE_BREAKS, 'name must not contain line breaks'),
    // Checked by parseSegmentFilter.
    filter: yup.mixed().required('filter is required'),
  })
  .noUnknown(({ unknown }) => `unknown field(s): ${unknown}`)
  .strict();

export type CreateSegmentBody = yup.InferType<typeof createSegmentSchema>;
