import type Router from '@koa/router';
import type { Orm } from '../../db/orm';
import { Broadcast, Domain, Segment, Topic } from '../../db/entities';
import { isUuid, uuidv7 } from '../../db/ids';
import { broadcastProgress } from '../../db/sql/broadcast-progress';
import { cancelBroadcast } from '../../db/sql/cancel-broadcast';
import { notFound, ServiceError, validationError } from '../../core/errors';
import { parseMailbox } from '../../core/emails/address';
import { isBulkKind } from '../../core/emails/prepare';
import { MAX_SCHEDULE_AHEAD_MS, MAX_SCHEDULE_PAST_MS } from '../../core/emails/schema';
import { unknownTopic } from '../../core/contacts/rules';
import { parseTemplateRequest } from '../../core/templates/request';
import { templateNotFound, type TemplateResolver } from '../../core/templates/resolver';
import { parseTimestamp } from '../../core/time';
import { requirePermission } from '../middleware/auth';
import { apiRouter, auth, type ApiContext, type ApiState } from '../state';
import { listQuerySchema, readValidBody, validateQuery } from '../validate';
import { listBody, olderThanCursor, pageOf } from '../cursor';
import { audit } from '../audit';
import { createBroadcastSchema, type CreateBroadcastBody } from './schema';
import { presentBroadcast } from './present';
import type { Logger } from 'pino';
import type { Engine } from '../../worker/engine';
import { BROADCAST_CANCEL_SIGNAL, broadcastWorkflowId } from '../../workflows/broadcast';

export interface BroadcastRoutesDeps {
  orm: Orm;
  maxBodyBytes: number;
  templates: TemplateResolver;
  engine: Engine;
  log: Logger;
  /** Wakes the dispatcher that starts fan-out runs (it also polls). */
  startBroadcasts?: () => void;
}

const DEFAULT_KIND = 'broadcast.default';

/**
 * Broadcasts (ADMIN; audit-logged; test keys 403): one message to every eligible member of a
 * segment, fanned out durably through the one send path (workflows/broadcast.ts).
 */
export function broadcastRoutes(deps: BroadcastRoutesDeps): Router<ApiState> {
  const router = apiRouter();
  const admin = requirePermission('admin');
  const { orm } = deps;

  async function find(ctx: ApiContext): Promise<Broadcast> {
    const id = ctx.params.id;
    const b = isUuid(id) ? await orm.em.fork().findOne(Broadcast, { id, organizationId: auth(ctx).organization.id }) : null;
    if (!b) throw notFound('broadcast');
    return b;
  }

  async function present(list: Broadcast[]) {
    const progress = await broadcastProgress(
      orm,
      list.map((b) => b.id),
    );
    const topicIds = [...new Set(list.flatMap((b) => (b.topicId ? [b.topicId] : [])))];
    const topics = topicIds.length ? await orm.em.fork().find(Topic, { id: { $in: topicIds } }) : [];
    const slug = new Map(topics.map((t) => [t.id, t.slug]));
    return list.map((b) => presentBroadcast(b, progress.get(b.id), b.topicId ? (slug.get(b.topicId) ?? null) : null));
  }

  router.post('/broadcasts', admin, async (ctx) => {
    const a = auth(ctx);
    const body: CreateBroadcastBody = await readValidBody(ctx, createBroadcastSchema, deps.maxBodyBytes);
    const template = body.template === undefined ? null : parseTemplateRequest(body.template);
    if (template) {
      const clash = (['subject', 'html', 'text'] as const).filter((k) => body[k] !== undefined);
      if (clash.length || Object.keys(template.data).length || body.template === null) {
        throw validationError(
          'a template broadcast renders subject and bodies from each contact: give neither subject/html/text nor data',
          [{ field: clash[0] ?? 'template.data', message: 'not allowed with template' }],
        );
      }
    } else if (body.subject === undefined || (body.html === undefined && body.text === undefined)) {
      throw validationError('subject and html or text (or both) are required without a template', [
        { field: body.subject === undefined ? 'subject' : 'html', message: 'required without template' },
      ]);
    }
    const kind = body.kind ?? DEFAULT_KIND;
    if (!isBulkKind(kind)) {
      throw validationError(`kind ${kind} is not a bulk kind (bulk., broadcast., digest., sequence.): a broadcast is bulk mail`, [
        { field: 'kind', message: 'must be a bulk kind' },
      ]);
    }
    let scheduledAt: Date | null = null;
    if (body.scheduled_at !== undefined) {
      scheduledAt = parseTimestamp(body.scheduled_at, { requireOffset: true })!;
      const ahead = scheduledAt.getTime() - Date.now();
      if (ahead > MAX_SCHEDULE_AHEAD_MS || ahead < -MAX_SCHEDULE_PAST_MS) {
        throw validationError('scheduled_at may be at most 30 days ahead and 5 minutes back', [
          { field: 'scheduled_at', message: 'out of range' },
        ]);
      }
    }
    const em = orm.em.fork();
    if (!isUuid(body.segment_id) || !(await em.findOne(Segment, { id: body.segment_id, organizationId: a.organization.id }))) {
      throw notFound('segment');
    }
    const topic = body.topic === undefined ? null : await em.findOne(Topic, { organizationId: a.organization.id, slug: body.topic });
    if (body.topic !== undefined && !topic) throw unknownTopic([body.topic]);
    const sender = parseMailbox(body.from)!;
    const domain = await em.findOne(Domain, {
      organizationId: a.organization.id,
      name: sender.domain.toLowerCase(),
      status: 'verified',
      deletedAt: null,
    });
    if (!domain || (a.key.domainIds !== null && !a.key.domainIds.includes(domain.id))) {
      throw new ServiceError('domain_not_verified', `${sender.domain} is not a verified domain of this organization allowed for this key`);
    }
    if (domain.stream !== 'bulk') {
      throw new ServiceError('stream_mismatch', `a broadcast is bulk mail; ${domain.name} is a transactional-stream domain`);
    }
    let version: { templateId: string; version: number } | null = null;
    if (template) {
      const [resolved] = template.unresolvable
        ? [templateNotFound(template.ref)]
        : ((await deps.templates.resolve({ organizationId: a.organization.id }, [template.ref], { fresh: true })) ?? []);
      if (!resolved || resolved instanceof ServiceError) throw resolved ?? templateNotFound(template.ref);
      version = { templateId: resolved.templateId, version: resolved.version };
    }
    const now = new Date();
    const b = Object.assign(new Broadcast(), {
      id: uuidv7(now.getTime()),
      organizationId: a.organization.id,
      apiKeyId: a.key.id,
      segmentId: body.segment_id,
      name: body.name ?? null,
      from: body.from.trim(),
      domainId: domain.id,
      topicId: topic?.id ?? null,
      kind,
      subject: body.subject ?? null,
      html: body.html ?? null,
      text: body.text ?? null,
      templateId: version?.templateId ?? null,
      templateVersion: version?.version ?? null,
      scheduledAt,
      status: 'queued' as const,
      createdAt: now,
      updatedAt: now,
    });
    em.persist(b);
    audit(em, a, 'broadcast.created', { type: 'broadcast', id: b.id }, { segment_id: b.segmentId, kind, topic: body.topic ?? null });
    // The row is the outbox: committed with enqueued_at null, the dispatcher starts its fan-out.
    await em.flush();
    deps.startBroadcasts?.();
    ctx.status = 201;
    ctx.body = (await present([b]))[0];
  });

  router.get('/broadcasts', admin, async (ctx) => {
    const a = auth(ctx);
    const q = validateQuery(listQuerySchema, ctx.query);
    const rows = await orm.em
      .fork()
      .find(
        Broadcast,
        { organizationId: a.organization.id, ...olderThanCursor(q.cursor) },
        { orderBy: { createdAt: 'desc', id: 'desc' }, limit: q.limit + 1 },
      );
    const { page, nextCursor } = pageOf(rows, q.limit);
    ctx.body = listBody(await present(page), nextCursor);
  });

  router.get('/broadcasts/:id', admin, async (ctx) => {
    ctx.body = (await present([await find(ctx)]))[0];
  });

  /** Cancels what has not been picked up; answers how many messages that was. */
  router.post('/broadcasts/:id/cancel', admin, async (ctx) => {
    const a = auth(ctx);
    const b = await find(ctx);
    const result = await cancelBroadcast(orm, a.organization.id, b.id, new Date());
    if (!result.changed) {
      const [view] = await present([b]);
      throw new ServiceError('not_cancelable', `broadcast is ${view.status}; only a queued or sending broadcast can be canceled`);
    }
    // A run waiting for its scheduled time ends now rather than at that time.
    await deps.engine
      .signal(broadcastWorkflowId(b.id), BROADCAST_CANCEL_SIGNAL)
      .catch((err) => deps.log.warn({ err, broadcastId: b.id }, 'cancel signal not delivered; the run ends when its wait does'));
    const em = orm.em.fork();
    audit(em, a, 'broadcast.canceled', { type: 'broadcast', id: b.id }, { canceled: result.canceled });
    await em.flush();
    const fresh = await orm.em.fork().findOneOrFail(Broadcast, { id: b.id });
    ctx.body = { ...(await present([fresh]))[0], canceled: result.canceled };
  });

  return router;
}
