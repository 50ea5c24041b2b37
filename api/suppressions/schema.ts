import * as yup from 'yup';
import { bodySchema } from '../../core/validate';
import { parseAddrSpec } from '../../core/emails/address';
import { listQuerySchema } from '../validate';

export const SUPPRESSION_REASONS = ['bounce', 'complaint', 'manual'] as const;

/** One bare address (`local@domain`), by the one strict parser; stored lower-cased. */
const address = yup
  .string()
  .strict()
  .max(254, 'email must be at most 254 characters')
  .test('address', 'email must be one address (local@domain)', (v) => v === undefined || parseAddrSpec(v) !== null);

export const createSuppressionSchema = bodySchema({ email: address.required('email is required') });

export const suppressionsQuerySchema = listQuerySchema.shape({
  reason: yup.string().oneOf([...SUPPRESSION_REASONS], 'reason must be bounce, complaint or manual'),
  email: address,
});

/** DELETE /suppressions/:email?note=...: why it was removed, kept in the audit row (one line, 1–500 characters). */
export const deleteSuppressionQuerySchema = yup.object({
  note: yup
    .string()
    .trim()
    .min(1)
    .max(500)
    .matches(/^[^\r\n]*$/, 'note must be one line'),
});

export type CreateSuppressionBody = yup.InferType<typeof createSuppressionSchema>;
