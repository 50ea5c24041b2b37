import type Router from '@koa/router';
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../../db/orm';
import { Automation, AutomationRun, AutomationVersion, Topic } from '../../db/entities';
import { isUuid, uuidv7 } from '../../db/ids';
import { cancelRuns } from '../../db/sql/automation-run-state';
import { notFound, ServiceError, validationError, type ErrorDetail } from '../../core/errors';
import { parseAutomation, type AutomationDefinition, type ParsedAutomation } from '../../core/automations/definition';
import type { TemplateResolver } from '../../core/templates/resolver';
import type { AuthState } from '../../core/auth';
import { readJsonBody } from '../middleware/json-body';
import { requirePermission } from '../middleware/auth';
import { apiRouter, auth, type ApiContext, type ApiState } from '../state';
import { listQuerySchema, readValidBody, validateQuery } from '../validate';
import { listBody, olderThanCursor, pageOf } from '../cursor';
import { audit } from '../audit';
import { listRunsQuerySchema, patchAutomationSchema } from './schema';
import { presentAutomation, presentRun } from './present';
import { PARK_AFTER_MS } from '../../workflows/automation-run';

export interface AutomationRoutesDeps {
  orm: Orm;
  maxBodyBytes: number;
  templates: TemplateResolver;
  /** Wakes the automation dispatcher (cancels to signal); it also polls. */
  automations?: () => void;
}

/**
 * Automations and their runs (ADMIN; writes audit-logged; test keys 403 as on every management
 * endpoint). A definition is checked whole (core/automations/definition.ts), then its templates and
 * topics against the database, each refusal naming its step path; nothing is written on a refusal.
 */
export function automationRoutes(deps: AutomationRoutesDeps): Router<ApiState> {
  const router = apiRouter();
  const admin = requirePermission('admin');
  const { orm } = deps;

  async function find(ctx: ApiContext, em: EntityManager): Promise<Automation> {
    const id = ctx.params.id;
    const found = isUuid(id) ? await em.findOne(Automation, { id, organizationId: auth(ctx).organization.id, deletedAt: null }) : null;
    if (!found) throw notFound('automation');
    return found;
  }

  async function definitionOf(em: EntityManager, a: Automation): Promise<AutomationDefinition> {
    const v = await em.findOneOrFail(AutomationVersion, { automationId: a.id, version: a.version });
    return v.definition as unknown as AutomationDefinition;
  }

  /** The database's half of the checks: every template resolves to a published version, every topic exists. */
  async function resolveReferences(em: EntityManager, a: AuthState, parsed: ParsedAutomation): Promise<{ triggerTopicId: string | null }> {
    const details: ErrorDetail[] = [];
    if (parsed.templates.length) {
      const resolved = await deps.templates.resolve(
        { organizationId: a.organization.id },
        parsed.templates.map((t) => t.ref),
        { fresh: true },
      );
      parsed.templates.forEach((t, i) => {
        const r = resolved?.[i];
        if (!r || r instanceof ServiceError)
          details.push({
            field: t.path,
            message: `no published ${t.ref.version ? `version ${t.ref.version} of ` : ''}template ${t.ref.id ?? t.ref.slug}`,
          });
      });
    }
    let triggerTopicId: string | null = null;
    if (parsed.topics.length) {
      const slugs = [...new Set(parsed.topics.map((t) => t.slug))];
      const topics = await em.find(Topic, { organizationId: a.organization.id, slug: { $in: slugs } });
      const bySlug = new Map(topics.map((t) => [t.slug, t.id]));
      for (const t of parsed.topics) if (!bySlug.has(t.slug)) details.push({ field: t.path, message: `no topic ${t.slug}` });
      const trigger = parsed.definition.trigger;
      if (trigger.type === 'topic.subscribed') triggerTopicId = bySlug.get(trigger.topic) ?? null;
    }
    if (details.length) throw validationError(details.map((d) => `${d.field}: ${d.message}`).join('; '), details);
    return { triggerTopicId };
  }

  /** What the run-starting statements match and write from the automation's row, for its latest version. */
  function triggerColumns(d: AutomationDefinition, triggerTopicId: string | null) {
    const first = d.steps[0];
    return {
      triggerType: d.trigger.type,
      triggerEvent: d.trigger.type === 'event' ? d.trigger.event : null,
      triggerTopicId,
      // A first delay the workflow would park in: new runs are written parked in it.
      parkFirstSeconds: first?.type === 'delay' && first.seconds * 1000 >= PARK_AFTER_MS ? first.seconds : null,
    };
  }

  async function parseBody(ctx: ApiContext): Promise<ParsedAutomation> {
    return parseAutomation(await readJsonBody(ctx, deps.maxBodyBytes));
  }

  router.post('/automations', admin, async (ctx) => {
    const a = auth(ctx);
    const parsed = await parseBody(ctx);
    await orm.em.fork().transactional(async (em) => {
      const { triggerTopicId } = await resolveReferences(em, a, parsed);
      const now = new Date();
      const enabled = parsed.enabled ?? true;
      const automation = Object.assign(new Automation(), {
        id: uuidv7(now.getTime()),
        organizationId: a.organization.id,
        name: parsed.name,
        enabled,
        version: 1,
        ...triggerColumns(parsed.definition, triggerTopicId),
        apiKeyId: a.key.id,
        enabledSince: enabled ? now : null,
        deletedAt: null,
        createdAt: now,
        updatedAt: now,
      });
      // The row before its version (the entities declare no relation for MikroORM to order by).
      await em.persist(automation).flush();
      em.persist(version(automation, parsed.definition, a, now));
      audit(em, a, 'automation.created', { type: 'automation', id: automation.id }, { name: automation.name, version: 1 });
      await em.flush();
      ctx.status = 201;
      ctx.body = presentAutomation(automation, parsed.definition);
    });
  });

  router.get('/automations', admin, async (ctx) => {
    const q = validateQuery(listQuerySchema, ctx.query);
    const em = orm.em.fork();
    const rows = await em.find(
      Automation,
      { organizationId: auth(ctx).organization.id, deletedAt: null, ...olderThanCursor(q.cursor) },
      { orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], limit: q.limit + 1 },
    );
    const { page, nextCursor } = pageOf(rows, q.limit);
    const versions = page.length
      ? await em.find(AutomationVersion, { $or: page.map((p) => ({ automationId: p.id, version: p.version })) })
      : [];
    const byId = new Map(versions.map((v) => [v.automationId, v.definition as unknown as AutomationDefinition]));
    ctx.body = listBody(
      page.map((p) => presentAutomation(p, byId.get(p.id)!)),
      nextCursor,
    );
  });

  router.get('/automations/:id', admin, async (ctx) => {
    const em = orm.em.fork();
    const found = await find(ctx, em);
    ctx.body = presentAutomation(found, await definitionOf(em, found));
  });

  router.put('/automations/:id', admin, async (ctx) => {
    const a = auth(ctx);
    const parsed = await parseBody(ctx);
    await orm.em.fork().transactional(async (em) => {
      const found = await find(ctx, em);
      // Versions are numbered under the row's lock: two concurrent PUTs make two versions.
      await em.lock(found, LockMode.PESSIMISTIC_WRITE);
      await em.refresh(found);
      const { triggerTopicId } = await resolveReferences(em, a, parsed);
      const now = new Date();
      const enabled = parsed.enabled ?? found.enabled;
      Object.assign(found, {
        name: parsed.name,
        version: found.version + 1,
        ...triggerColumns(parsed.definition, triggerTopicId),
        apiKeyId: a.key.id,
        enabledSince: enabled && !found.enabled ? now : found.enabledSince,
        enabled,
        updatedAt: now,
      });
      em.persist(version(found, parsed.definition, a, now));
      audit(em, a, 'automation.updated', { type: 'automation', id: found.id }, { version: found.version });
      await em.flush();
      ctx.body = presentAutomation(found, parsed.definition);
    });
  });

  router.patch('/automations/:id', admin, async (ctx) => {
    const a = auth(ctx);
    const body = await readValidBody(ctx, patchAutomationSchema, deps.maxBodyBytes);
    await orm.em.fork().transactional(async (em) => {
      const found = await find(ctx, em);
      const now = new Date();
      if (body.enabled !== found.enabled) {
        // Re-enabled: triggers from while it was off are not its concern (enabled_since).
        Object.assign(found, { enabled: body.enabled, enabledSince: body.enabled ? now : found.enabledSince, updatedAt: now });
        audit(em, a, body.enabled ? 'automation.enabled' : 'automation.disabled', { type: 'automation', id: found.id });
        await em.flush();
      }
      ctx.body = presentAutomation(found, await definitionOf(em, found));
    });
  });

  router.delete('/automations/:id', admin, async (ctx) => {
    const a = auth(ctx);
    const removed = await orm.em.fork().transactional(async (em) => {
      const found = await find(ctx, em);
      const now = new Date();
      Object.assign(found, { enabled: false, deletedAt: now, updatedAt: now });
      audit(em, a, 'automation.deleted', { type: 'automation', id: found.id }, { name: found.name });
      await em.flush();
      return presentAutomation(found, await definitionOf(em, found));
    });
    // After the commit: no new run can start for it now; the ones going are canceled and woken.
    const canceled = (await cancelRuns(orm, { automationId: removed.id }, new Date())).length;
    if (canceled) deps.automations?.();
    ctx.body = { ...removed, deleted: true, canceled_runs: canceled };
  });

  router.get('/automations/:id/runs', admin, async (ctx) => {
    const q = validateQuery(listRunsQuerySchema, ctx.query);
    const em = orm.em.fork();
    const found = isUuid(ctx.params.id)
      ? await em.findOne(Automation, { id: ctx.params.id, organizationId: auth(ctx).organization.id })
      : null;
    if (!found) throw notFound('automation');
    const rows = await em.find(
      AutomationRun,
      { automationId: found.id, ...(q.status ? { status: q.status } : {}), ...olderThanCursor(q.cursor) },
      { orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], limit: q.limit + 1 },
    );
    const { page, nextCursor } = pageOf(rows, q.limit);
    ctx.body = listBody(page.map(presentRun), nextCursor);
  });

  async function findRun(ctx: ApiContext): Promise<AutomationRun> {
    const id = ctx.params.id;
    const run = isUuid(id) ? await orm.em.fork().findOne(AutomationRun, { id, organizationId: auth(ctx).organization.id }) : null;
    if (!run) throw notFound('automation run');
    return run;
  }

  router.get('/automation-runs/:id', admin, async (ctx) => {
    ctx.body = presentRun(await findRun(ctx));
  });

  router.post('/automation-runs/:id/cancel', admin, async (ctx) => {
    const a = auth(ctx);
    const run = await findRun(ctx);
    const canceled = await cancelRuns(orm, { runId: run.id }, new Date());
    if (!canceled.length)
      throw new ServiceError('not_cancelable', `the run is ${(await findRun(ctx)).status}; only running or waiting runs can be canceled`);
    await orm.em.fork().transactional(async (em) => {
      audit(em, a, 'automation_run.canceled', { type: 'automation_run', id: run.id }, { automation_id: run.automationId });
    });
    deps.automations?.();
    ctx.body = presentRun(await findRun(ctx));
  });

  return router;
}

function version(a: Automation, definition: AutomationDefinition, key: AuthState, now: Date): AutomationVersion {
  return Object.assign(new AutomationVersion(), {
    automationId: a.id,
    version: a.version,
    definition: definition as unknown as Record<string, unknown>,
    apiKeyId: key.key.id,
    createdAt: now,
  });
}
