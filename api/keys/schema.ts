import * as yup from 'yup';
import { bodySchema } from '../../core/validate';
import { isUuid } from '../../db/ids';

export const createKeySchema = bodySchema({
  name: yup.string().strict().trim().min(1).max(128).required(),
  permission: yup
    .string()
    .strict()
    .oneOf(['send', 'full', 'admin'] as const)
    .required(),
  mode: yup
    .string()
    .strict()
    .oneOf(['live', 'test'] as const)
    .required(),
  domain_ids: yup
    .array(
      yup
        .string()
        .strict()
        .required()
        .test('uuid', '${path} must be a domain id', (v) => isUuid(v)),
    )
    .strict()
    .min(1, 'domain_ids must name at least one domain; omit it for every domain')
    .max(100),
  rate_limit: yup.number().strict().integer('rate_limit must be an integer').min(1).max(1000),
});

export type CreateKeyBody = yup.InferType<typeof createKeySchema>;
