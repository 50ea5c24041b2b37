import type Router from '@koa/router';
import type { Orm } from '../../db/orm';
import { Organization, PLAN_DAILY_CEILING, effectiveDailySendCap } from '../../db/entities';
import { validationError } from '../../core/errors';
import { requirePermission } from '../middleware/auth';
import { apiRouter, auth, type ApiState } from '../state';
import { readValidBody } from '../validate';
import { audit } from '../audit';
import { updateOrganizationSchema, type UpdateOrganizationBody } from './schema';

function present(o: Organization) {
  return {
    object: 'organization',
    id: o.id,
    name: o.name,
    plan: o.plan,
    postal_address: o.postalAddress,
    daily_send_cap: o.dailySendCap,
    effective_daily_send_cap: effectiveDailySendCap(o),
    plan_daily_send_ceiling: PLAN_DAILY_CEILING[o.plan],
    created_at: o.createdAt.toISOString(),
    updated_at: o.updatedAt.toISOString(),
  };
}

/** Organization settings (ADMIN): name, postal address (bulk mail's legal footer), daily send cap. */
export function organizationRoutes(deps: { orm: Orm; maxBodyBytes: number }): Router<ApiState> {
  const router = apiRouter();
  router.get('/organization', requirePermission('admin'), async (ctx) => {
    ctx.body = present(await deps.orm.em.fork().findOneOrFail(Organization, { id: auth(ctx).organization.id }));
  });

  router.patch('/organization', requirePermission('admin'), async (ctx) => {
    const a = auth(ctx);
    const body: UpdateOrganizationBody = await readValidBody(ctx, updateOrganizationSchema, deps.maxBodyBytes);
    const ceiling = PLAN_DAILY_CEILING[a.organization.plan];
    if (body.daily_send_cap != null && body.daily_send_cap > ceiling) {
      throw validationError(
        `daily_send_cap can only lower the ${a.organization.plan} plan's ceiling of ${ceiling} per day (0 or null means the ceiling)`,
        [{ field: 'daily_send_cap', message: `at most ${ceiling}` }],
      );
    }
    const em = deps.orm.em.fork();
    const org = await em.findOneOrFail(Organization, { id: a.organization.id });
    const changes: Record<string, unknown> = {};
    if (body.name !== undefined && body.name !== org.name) changes.name = org.name = body.name;
    if (body.postal_address !== undefined && body.postal_address !== org.postalAddress)
      changes.postal_address = org.postalAddress = body.postal_address;
    if (body.daily_send_cap !== undefined && body.daily_send_cap !== org.dailySendCap)
      changes.daily_send_cap = org.dailySendCap = body.daily_send_cap;
    if (Object.keys(changes).length) {
      org.updatedAt = new Date();
      audit(em, a, 'organization.updated', { type: 'organization', id: org.id }, { changes });
      await em.flush();
    }
    ctx.body = present(org);
  });
  return router;
}
