import type Router from '@koa/router';
import type { Orm } from '../../db/orm';
import { Segment } from '../../db/entities';
import { isUuid, uuidv7 } from '../../db/ids';
import { countContacts } from '../../db/sql/count-contacts';
import { notFound } from '../../core/errors';
import { parseSegmentFilter, resolveConditions } from '../../core/segments/filter';
import { requirePermission } from '../middleware/auth';
import { apiRouter, auth, type ApiContext, type ApiState } from '../state';
import { listQuerySchema, readValidBody, validateQuery } from '../validate';
import { listBody, olderThanCursor, pageOf } from '../cursor';
import { audit } from '../audit';
import { createSegmentSchema, type CreateSegmentBody } from './schema';
import { presentSegment } from './present';

/** Segments (ADMIN; audit-logged): saved filters, counted fresh on every read. */
export function segmentRoutes(deps: { orm: Orm; maxBodyBytes: number }): Router<ApiState> {
  const router = apiRouter();
  const admin = requirePermission('admin');

  async function find(ctx: ApiContext): Promise<Segment> {
    const id = ctx.params.id;
    const segment = isUuid(id) ? await deps.orm.em.fork().findOne(Segment, { id, organizationId: auth(ctx).organization.id }) : null;
    if (!segment) throw notFound('segment');
    return segment;
  }

  const count = async (s: Segment) =>
    countContacts(deps.orm, s.organizationId, await resolveConditions(deps.orm.em.fork(), s.organizationId, s.filter.all, false));

  router.post('/segments', admin, async (ctx) => {
    const a = auth(ctx);
    const body: CreateSegmentBody = await readValidBody(ctx, createSegmentSchema, deps.maxBodyBytes);
    const filter = parseSegmentFilter(body.filter);
    const em = deps.orm.em.fork();
    const conditions = await resolveConditions(em, a.organization.id, filter.all, true);
    const segment = Object.assign(new Segment(), {
      id: uuidv7(),
      organizationId: a.organization.id,
      name: body.name,
      filter,
      createdAt: new Date(),
    });
    em.persist(segment);
    audit(em, a, 'segment.created', { type: 'segment', id: segment.id }, { name: segment.name, filter });
    await em.flush();
    ctx.status = 201;
    ctx.body = presentSegment(segment, await countContacts(deps.orm, a.organization.id, conditions));
  });

  router.get('/segments', admin, async (ctx) => {
    const a = auth(ctx);
    const q = validateQuery(listQuerySchema, ctx.query);
    const rows = await deps.orm.em
      .fork()
      .find(
        Segment,
        { organizationId: a.organization.id, ...olderThanCursor(q.cursor) },
        { orderBy: { createdAt: 'desc', id: 'desc' }, limit: q.limit + 1 },
      );
    const { page, nextCursor } = pageOf(rows, q.limit);
    // The page's topics are looked up once, for every segment on it.
    const resolved = await resolveConditions(
      deps.orm.em.fork(),
      a.organization.id,
      page.flatMap((s) => s.filter.all),
      false,
    );
    const data = [];
    let at = 0;
    for (const s of page) {
      const conditions = resolved.slice(at, (at += s.filter.all.length));
      data.push(presentSegment(s, await countContacts(deps.orm, a.organization.id, conditions)));
    }
    ctx.body = listBody(data, nextCursor);
  });

  router.get('/segments/:id', admin, async (ctx) => {
    const segment = await find(ctx);
    ctx.body = presentSegment(segment, await count(segment));
  });

  router.delete('/segments/:id', admin, async (ctx) => {
    const a = auth(ctx);
    const segment = await find(ctx);
    await deps.orm.em.fork().transactional(async (em) => {
      if (!(await em.nativeDelete(Segment, { id: segment.id }))) throw notFound('segment');
      audit(em, a, 'segment.deleted', { type: 'segment', id: segment.id }, { name: segment.name });
    });
    ctx.body = {
      object: 'segment',
      id: segment.id,
      name: segment.name,
      filter: segment.filter,
      created_at: segment.createdAt.toISOString(),
      deleted: true,
    };
  });

  return router;
}
