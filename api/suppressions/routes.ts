import type Router from '@koa/router';
import type { Orm } from '../../db/orm';
import { Suppression } from '../../db/entities';
import { uuidv7 } from '../../db/ids';
import { parseAddrSpec } from '../../core/emails/address';
import { notFound } from '../../core/errors';
import { requirePermission } from '../middleware/auth';
import { apiRouter, auth, type ApiState } from '../state';
import { readValidBody, validateQuery } from '../validate';
import { listBody, olderThanCursor, pageOf } from '../cursor';
import { audit } from '../audit';
import { createSuppressionSchema, deleteSuppressionQuerySchema, suppressionsQuerySchema, type CreateSuppressionBody } from './schema';
import { presentSuppression } from './present';

/**
 * The organization's suppression list (ADMIN; test keys 403 by requirePermission): what bounces
 * and complaints added (reasons `bounce`, `complaint`) and what an admin adds (`manual`). Sends
 * drop listed addresses at acceptance (db/sql/store-emails.ts). docs/api.md, Suppressions.
 */
export function suppressionRoutes(deps: { orm: Orm; maxBodyBytes: number }): Router<ApiState> {
  const router = apiRouter();
  const admin = requirePermission('admin');

  router.get('/suppressions', admin, async (ctx) => {
    const q = validateQuery(suppressionsQuerySchema, ctx.query);
    const rows = await deps.orm.em.fork().find(
      Suppression,
      {
        organizationId: auth(ctx).organization.id,
        ...(q.reason ? { reason: q.reason } : {}),
        ...(q.email ? { email: parseAddrSpec(q.email)!.normalized } : {}),
        ...olderThanCursor(q.cursor),
      },
      { orderBy: { createdAt: 'desc', id: 'desc' }, limit: q.limit + 1 },
    );
    const { page, nextCursor } = pageOf(rows, q.limit);
    ctx.body = listBody(page.map(presentSuppression), nextCursor);
  });

  router.post('/suppressions', admin, async (ctx) => {
    const a = auth(ctx);
    const body: CreateSuppressionBody = await readValidBody(ctx, createSuppressionSchema, deps.maxBodyBytes);
    const email = parseAddrSpec(body.email)!.normalized;
    const { row, added } = await deps.orm.em.fork().transactional(async (em) => {
      // The unique (organization, email) index settles two concurrent adds: one inserts, the other reads.
      const inserted = await em.getConnection().execute<{ id: string }[]>(
        `insert into suppressions (id, organization_id, email, reason, source_email_id, created_at)
         values (?, ?, ?, 'manual', null, now()) on conflict (organization_id, email) do nothing returning id`,
        [uuidv7(), a.organization.id, email],
        'all',
        em.getTransactionContext(),
      );
      const existing = await em.findOneOrFail(Suppression, { organizationId: a.organization.id, email });
      if (inserted.length) audit(em, a, 'suppression.created', { type: 'suppression', id: existing.id }, { email, reason: 'manual' });
      return { row: existing, added: inserted.length > 0 };
    });
    // An address already listed keeps its row and its reason: adding it again is a no-op.
    ctx.status = added ? 201 : 200;
    ctx.body = presentSuppression(row);
  });

  router.delete('/suppressions/:email', admin, async (ctx) => {
    const a = auth(ctx);
    const { note } = validateQuery(deleteSuppressionQuerySchema, ctx.query);
    const parsed = parseAddrSpec(ctx.params.email ?? '');
    if (!parsed) throw notFound('suppression');
    const email = parsed.normalized;
    const row = await deps.orm.em.fork().transactional(async (em) => {
      const found = await em.findOne(Suppression, { organizationId: a.organization.id, email });
      if (!found || !(await em.nativeDelete(Suppression, { id: found.id, organizationId: a.organization.id }))) {
        throw notFound('suppression');
      }
      audit(
        em,
        a,
        'suppression.deleted',
        { type: 'suppression', id: found.id },
        { email, reason: found.reason, ...(note ? { note } : {}) },
      );
      return found;
    });
    // The contact's status stays as it is (a bounced contact stays `bounced` until changed through contacts).
    ctx.body = { ...presentSuppression(row), deleted: true };
  });

  return router;
}
