import type Router from '@koa/router';
import type { Orm } from '../../db/orm';
import { Domain, Organization } from '../../db/entities';
import { validationError } from '../../core/errors';
import { PLAN_CEILING, organizationLimit } from '../../core/limits/caps';
import { dailyUsage, type CapsSettings } from '../../core/limits/usage';
import { requirePermission } from '../middleware/auth';
import { apiRouter, auth, type ApiState } from '../state';
import { readValidBody } from '../validate';
import { audit } from '../audit';
import { updateOrganizationSchema, type UpdateOrganizationBody } from './schema';

function present(o: Organization, usage: Awaited<ReturnType<typeof dailyUsage>>) {
  return {
    object: 'organization',
    id: o.id,
    name: o.name,
    plan: o.plan,
    postal_address: o.postalAddress,
    daily_send_cap: o.dailySendCap,
    /** null: no organization cap (a service plan with daily_send_cap 0). */
    effective_daily_send_cap: organizationLimit(o.plan, o.dailySendCap),
    plan_daily_send_ceiling: PLAN_CEILING[o.plan] ?? null,
    daily_usage: usage,
    created_at: o.createdAt.toISOString(),
    updated_at: o.updatedAt.toISOString(),
  };
}

/** Organization settings (ADMIN): name, postal address (bulk mail's legal footer), daily send cap; today's use of the caps. */
export function organizationRoutes(deps: { orm: Orm; maxBodyBytes: number; caps: CapsSettings }): Router<ApiState> {
  const router = apiRouter();

  async function show(em: ReturnType<Orm['em']['fork']>, org: Organization) {
    const domains = await em.find(
      Domain,
      { organizationId: org.id, deletedAt: null },
      { fields: ['id', 'name', 'warmupStage'], orderBy: { name: 'asc' } },
    );
    return present(org, await dailyUsage(em, deps.caps, org, domains));
  }

  router.get('/organization', requirePermission('admin'), async (ctx) => {
    const em = deps.orm.em.fork();
    ctx.body = await show(em, await em.findOneOrFail(Organization, { id: auth(ctx).organization.id }));
  });

  router.patch('/organization', requirePermission('admin'), async (ctx) => {
    const a = auth(ctx);
    const body: UpdateOrganizationBody = await readValidBody(ctx, updateOrganizationSchema, deps.maxBodyBytes);
    const ceiling = PLAN_CEILING[a.organization.plan];
    if (ceiling !== undefined && body.daily_send_cap != null && body.daily_send_cap > ceiling) {
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
    ctx.body = await show(em, org);
  });
  return router;
}
