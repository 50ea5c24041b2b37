import * as yup from 'yup';
import { listQuerySchema } from '../validate';

/** GET /audit-log's query: a page, filtered by who acted and by what they did. */
export const auditQuerySchema = listQuerySchema.shape({
  /** `key:<key id>`, `console:<operator email>` or `operator` (a change made through `svc`). */
  actor: yup.string().max(320),
  action: yup.string().max(100),
});

export type AuditQuery = yup.InferType<typeof auditQuerySchema>;
