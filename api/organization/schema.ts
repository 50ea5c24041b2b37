import * as yup from 'yup';

const NO_LINE_BREAKS_IN_NAME = /^[^\r\n]*$/;

export const updateOrganizationSchema = yup
  .object({
    name: yup.string().strict().trim().min(1).max(200).matches(NO_LINE_BREAKS_IN_NAME, 'name must not contain line breaks'),
    // Printed in the legal footer of bulk mail; several lines are allowed.
    postal_address: yup.string().strict().trim().min(1).max(500).nullable(),
    daily_send_cap: yup.number().strict().integer('daily_send_cap must be an integer').min(0).nullable(),
  })
  .noUnknown(({ unknown }) => `unknown field(s): ${unknown}`)
  .strict();

export type UpdateOrganizationBody = yup.InferType<typeof updateOrganizationSchema>;
