import type Router from '@koa/router';
import type { Orm } from '../../db/orm';
import { AuditEntry } from '../../db/entities';
import { listQuerySchema, validateQuery } from '../validate';
import { requirePermission } from '../middleware/auth';
import { apiRouter, auth, type ApiState } from '../state';
import { listBody, olderThanCursor, pageOf } from '../cursor';

/** The organization's audit log (ADMIN): newest first, keyset-paginated like GET /emails. */
export function auditLogRoutes(deps: { orm: Orm }): Router<ApiState> {
  const router = apiRouter();
  router.get('/audit-log', requirePermission('admin'), async (ctx) => {
    const a = auth(ctx);
    const q = validateQuery(listQuerySchema, ctx.query);
    const where = { organizationId: a.organization.id, ...olderThanCursor(q.cursor) };
    const rows = await deps.orm.em.fork().find(AuditEntry, where, { orderBy: { createdAt: 'desc', id: 'desc' }, limit: q.limit + 1 });
    const { page, nextCursor } = pageOf(rows, q.limit);
    ctx.body = listBody(
      page.map((e) => ({
        object: 'audit_entry',
        id: e.id,
        action: e.action,
        key_id: e.apiKeyId,
        target: { type: e.targetType, id: e.targetId },
        details: e.details,
        created_at: e.createdAt.toISOString(),
      })),
      nextCursor,
    );
  });
  return router;
}
