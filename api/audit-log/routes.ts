import type Router from '@koa/router';
import type { FilterQuery } from '@mikro-orm/core';
import type { Orm } from '../../db/orm';
import { AuditEntry } from '../../db/entities';
import { isUuid } from '../../db/ids';
import { validateQuery } from '../validate';
import { requirePermission } from '../middleware/auth';
import { apiRouter, auth, type ApiState } from '../state';
import { listBody, olderThanCursor, pageOf } from '../cursor';
import { auditQuerySchema } from './schema';

/** Who made a change: the key, the console's operator, or an operator through `svc`. */
export const actorOf = (e: Pick<AuditEntry, 'actor' | 'apiKeyId'>): string => e.actor ?? (e.apiKeyId ? `key:${e.apiKeyId}` : 'operator');

function actorFilter(actor: string): FilterQuery<AuditEntry> {
  if (actor === 'operator') return { actor: null, apiKeyId: null };
  if (actor.startsWith('key:')) {
    const id = actor.slice(4);
    // Not a key id: matches nothing (no stored actor starts with `key:`), like a filter of no rows.
    return isUuid(id) ? { apiKeyId: id } : { actor };
  }
  return { actor };
}

/** The organization's audit log (ADMIN): newest first, keyset-paginated like GET /emails, filtered by actor and action. */
export function auditLogRoutes(deps: { orm: Orm }): Router<ApiState> {
  const router = apiRouter();
  router.get('/audit-log', requirePermission('admin'), async (ctx) => {
    const a = auth(ctx);
    const q = validateQuery(auditQuerySchema, ctx.query);
    const where: FilterQuery<AuditEntry> = {
      organizationId: a.organization.id,
      ...olderThanCursor(q.cursor),
      ...(q.action ? { action: q.action } : {}),
      ...((q.actor ? actorFilter(q.actor) : {}) as object),
    };
    const rows = await deps.orm.em.fork().find(AuditEntry, where, { orderBy: { createdAt: 'desc', id: 'desc' }, limit: q.limit + 1 });
    const { page, nextCursor } = pageOf(rows, q.limit);
    ctx.body = listBody(
      page.map((e) => ({
        object: 'audit_entry',
        id: e.id,
        action: e.action,
        key_id: e.apiKeyId,
        actor: actorOf(e),
        target: { type: e.targetType, id: e.targetId },
        details: e.details,
        created_at: e.createdAt.toISOString(),
      })),
      nextCursor,
    );
  });
  return router;
}
