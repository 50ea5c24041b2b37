import Router from '@koa/router';
import { auth, requirePermission } from '../middleware/auth';

/** Organization settings (ADMIN). Updates arrive with the management plane. */
export function organizationRoutes(): Router {
  const router = new Router();
  router.get('/organization', requirePermission('admin'), (ctx) => {
    const { organization: o } = auth(ctx);
    ctx.body = { object: 'organization', id: o.id, name: o.name, plan: o.plan, postal_address: o.postalAddress, created_at: o.createdAt.toISOString() };
  });
  return router;
}
