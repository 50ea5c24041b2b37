import type { EntityManager } from '@mikro-orm/postgresql';
import { AuditEntry } from '../db/entities';
import { uuidv7 } from '../db/ids';
import type { AuthState } from '../core/auth';

/**
 * Records a management write in the organization's audit log, naming the key (or the console's
 * operator, `console:<email>`, with no key). Persisted on the
 * caller's EntityManager so it commits (or not) with the change itself.
 */
export function audit(
  em: EntityManager,
  a: AuthState,
  action: string,
  target: { type: string; id: string },
  details: Record<string, unknown> = {},
): void {
  em.persist(
    Object.assign(new AuditEntry(), {
      id: uuidv7(),
      organizationId: a.organization.id,
      apiKeyId: a.operator ? null : a.key.id,
      actor: a.operator ? `console:${a.operator.email}` : null,
      action,
      targetType: target.type,
      targetId: target.id,
      details,
      createdAt: new Date(),
    }),
  );
}
