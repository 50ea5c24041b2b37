import type Router from '@koa/router';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { Orm } from '../../db/orm';
import { Topic } from '../../db/entities';
import { uuidv7 } from '../../db/ids';
import { ServiceError, notFound } from '../../core/errors';
import { SLUG_RE } from '../../core/contacts/rules';
import { requirePermission } from '../middleware/auth';
import { apiRouter, auth, type ApiContext, type ApiState } from '../state';
import { listQuerySchema, readValidBody, validateQuery } from '../validate';
import { listBody, olderThanCursor, pageOf } from '../cursor';
import { audit } from '../audit';
import { createTopicSchema, updateTopicSchema, type CreateTopicBody, type UpdateTopicBody } from './schema';
import { presentTopic } from './present';

/** Topics (ADMIN; audit-logged), named by slug in paths as everywhere else. */
export function topicRoutes(deps: { orm: Orm; maxBodyBytes: number }): Router<ApiState> {
  const router = apiRouter();
  const admin = requirePermission('admin');

  async function find(ctx: ApiContext): Promise<Topic> {
    const slug = ctx.params.slug;
    const topic = SLUG_RE.test(slug) ? await deps.orm.em.fork().findOne(Topic, { organizationId: auth(ctx).organization.id, slug }) : null;
    if (!topic) throw notFound('topic');
    return topic;
  }

  router.post('/topics', admin, async (ctx) => {
    const a = auth(ctx);
    const body: CreateTopicBody = await readValidBody(ctx, createTopicSchema, deps.maxBodyBytes);
    const topic = Object.assign(new Topic(), {
      id: uuidv7(),
      organizationId: a.organization.id,
      slug: body.slug,
      name: body.name ?? body.slug,
      defaultOptIn: body.default_opt_in ?? false,
      createdAt: new Date(),
    });
    const em = deps.orm.em.fork();
    em.persist(topic);
    audit(
      em,
      a,
      'topic.created',
      { type: 'topic', id: topic.id },
      { slug: topic.slug, name: topic.name, default_opt_in: topic.defaultOptIn },
    );
    try {
      await em.flush();
    } catch (err) {
      if (err instanceof UniqueConstraintViolationException)
        throw new ServiceError('topic_exists', `a topic "${body.slug}" exists already`);
      throw err;
    }
    ctx.status = 201;
    ctx.body = presentTopic(topic);
  });

  router.get('/topics', admin, async (ctx) => {
    const a = auth(ctx);
    const q = validateQuery(listQuerySchema, ctx.query);
    const rows = await deps.orm.em
      .fork()
      .find(
        Topic,
        { organizationId: a.organization.id, ...olderThanCursor(q.cursor) },
        { orderBy: { createdAt: 'desc', id: 'desc' }, limit: q.limit + 1 },
      );
    const { page, nextCursor } = pageOf(rows, q.limit);
    ctx.body = listBody(page.map(presentTopic), nextCursor);
  });

  router.get('/topics/:slug', admin, async (ctx) => {
    ctx.body = presentTopic(await find(ctx));
  });

  router.patch('/topics/:slug', admin, async (ctx) => {
    const a = auth(ctx);
    const topic = await find(ctx);
    const body: UpdateTopicBody = await readValidBody(ctx, updateTopicSchema, deps.maxBodyBytes);
    const changes: Record<string, unknown> = {};
    if (body.name !== undefined) changes.name = body.name;
    if (body.default_opt_in !== undefined) changes.default_opt_in = body.default_opt_in;
    if (Object.keys(changes).length) {
      await deps.orm.em.fork().transactional(async (em) => {
        const updated = await em.nativeUpdate(
          Topic,
          { id: topic.id },
          {
            ...(body.name !== undefined ? { name: body.name } : {}),
            ...(body.default_opt_in !== undefined ? { defaultOptIn: body.default_opt_in } : {}),
          },
        );
        if (!updated) throw notFound('topic');
        audit(em, a, 'topic.updated', { type: 'topic', id: topic.id }, { slug: topic.slug, changes });
      });
    }
    ctx.body = presentTopic(
      Object.assign(topic, { name: body.name ?? topic.name, defaultOptIn: body.default_opt_in ?? topic.defaultOptIn }),
    );
  });

  router.delete('/topics/:slug', admin, async (ctx) => {
    const a = auth(ctx);
    const topic = await find(ctx);
    await deps.orm.em.fork().transactional(async (em) => {
      // Its subscription rows go by the foreign key's cascade.
      if (!(await em.nativeDelete(Topic, { id: topic.id }))) throw notFound('topic');
      audit(em, a, 'topic.deleted', { type: 'topic', id: topic.id }, { slug: topic.slug });
    });
    ctx.body = { ...presentTopic(topic), deleted: true };
  });

  return router;
}
