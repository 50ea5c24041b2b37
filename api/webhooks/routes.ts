import type Router from '@koa/router';
import type { Orm } from '../../db/orm';
import type { FilterQuery } from '@mikro-orm/core';
import { WebhookDelivery, WebhookEndpoint, type DeliveryStatus } from '../../db/entities';
import { isUuid, uuidv7 } from '../../db/ids';
import { requeueWebhookDeliveries } from '../../db/sql/requeue-webhook-deliveries';
import { ServiceError, notFound, validationError } from '../../core/errors';
import type { Secrets } from '../../core/secrets';
import { parseTimestamp } from '../../core/time';
import { newWebhookSecret } from '../../core/webhooks/sign';
import { urlProblem, type UrlPolicy } from '../../core/webhooks/ssrf';
import { WAKE_SIGNAL, webhookDeliveryWorkflowId } from '../../workflows/webhook-delivery';
import type { Engine } from '../../worker/engine';
import { requirePermission } from '../middleware/auth';
import { apiRouter, auth, type ApiContext, type ApiState } from '../state';
import { listQuerySchema, readValidBody, validateQuery } from '../validate';
import { listBody, olderThanCursor, pageOf } from '../cursor';
import { audit } from '../audit';
import { createWebhookSchema, deliveriesQuerySchema, recoverSchema, updateWebhookSchema, type UpdateWebhookBody } from './schema';
import { presentDelivery, presentWebhook } from './present';

/** How long a rotated-out secret keeps signing next to the new one. */
const ROTATION_OVERLAP_MS = 24 * 3_600_000;

export interface WebhookRoutesDeps {
  orm: Orm;
  engine: Engine;
  maxBodyBytes: number;
  webhooks: {
    secrets: Secrets;
    policy: UrlPolicy;
    /** Wakes this process's webhook dispatcher (others wake on the NOTIFY of the same write). */
    dispatch: () => void;
  };
}

/** Webhook endpoints and their deliveries (ADMIN; writes audit-logged). */
export function webhookRoutes(deps: WebhookRoutesDeps): Router<ApiState> {
  const router = apiRouter();
  const admin = requirePermission('admin');
  const { secrets, policy } = deps.webhooks;

  function checkUrl(raw: string): void {
    const problem = urlProblem(raw, policy);
    if (problem) throw validationError(problem, [{ field: 'url', message: problem }]);
  }

  async function find(ctx: ApiContext): Promise<WebhookEndpoint> {
    const id = ctx.params.id;
    const w = isUuid(id)
      ? await deps.orm.em.fork().findOne(WebhookEndpoint, { id: id.toLowerCase(), organizationId: auth(ctx).organization.id })
      : null;
    if (!w) throw notFound('webhook');
    return w;
  }

  router.post('/webhooks', admin, async (ctx) => {
    const a = auth(ctx);
    const body = await readValidBody(ctx, createWebhookSchema, deps.maxBodyBytes);
    checkUrl(body.url);
    const secret = newWebhookSecret();
    const now = new Date();
    const w = Object.assign(new WebhookEndpoint(), {
      id: uuidv7(),
      organizationId: a.organization.id,
      url: body.url,
      description: body.description ?? null,
      events: body.events ?? null,
      secretEnc: secrets.encrypt(secret),
      createdAt: now,
      updatedAt: now,
    });
    const em = deps.orm.em.fork();
    em.persist(w);
    audit(em, a, 'webhook.created', { type: 'webhook', id: w.id }, { url: w.url, events: w.events });
    await em.flush();
    ctx.status = 201;
    // The secret is shown this once; only its sealed form is stored.
    ctx.body = { ...presentWebhook(w), secret };
  });

  router.get('/webhooks', admin, async (ctx) => {
    const q = validateQuery(listQuerySchema, ctx.query);
    const rows = await deps.orm.em
      .fork()
      .find(
        WebhookEndpoint,
        { organizationId: auth(ctx).organization.id, ...olderThanCursor(q.cursor) },
        { orderBy: { createdAt: 'desc', id: 'desc' }, limit: q.limit + 1 },
      );
    const { page, nextCursor } = pageOf(rows, q.limit);
    ctx.body = listBody(page.map(presentWebhook), nextCursor);
  });

  router.get('/webhooks/:id', admin, async (ctx) => {
    ctx.body = presentWebhook(await find(ctx));
  });

  router.patch('/webhooks/:id', admin, async (ctx) => {
    const a = auth(ctx);
    const w = await find(ctx);
    const body: UpdateWebhookBody = await readValidBody(ctx, updateWebhookSchema, deps.maxBodyBytes);
    if (body.url !== undefined) checkUrl(body.url);
    const changes: Record<string, unknown> = {};
    for (const k of ['url', 'events', 'description', 'enabled'] as const) if (body[k] !== undefined) changes[k] = body[k];
    if (Object.keys(changes).length) {
      const now = new Date();
      const set: Partial<WebhookEndpoint> = { updatedAt: now };
      if (body.url !== undefined) set.url = body.url;
      if (body.events !== undefined) set.events = body.events;
      if (body.description !== undefined) set.description = body.description;
      if (body.enabled !== undefined && body.enabled !== w.enabled) {
        set.enabled = body.enabled;
        // Re-enabling starts a clean record. Events while disabled made no deliveries; `recover` re-sends the failed ones.
        set.disabledReason = body.enabled ? null : 'api';
        set.failingSince = null;
      }
      await deps.orm.em.fork().transactional(async (em) => {
        if (!(await em.nativeUpdate(WebhookEndpoint, { id: w.id, organizationId: a.organization.id }, set))) throw notFound('webhook');
        audit(
          em,
          a,
          'webhook.updated',
          { type: 'webhook', id: w.id },
          {
            changes,
            ...(set.enabled === false ? { reason: 'api' } : {}),
          },
        );
      });
      Object.assign(w, set);
    }
    ctx.body = presentWebhook(w);
  });

  router.delete('/webhooks/:id', admin, async (ctx) => {
    const a = auth(ctx);
    const w = await find(ctx);
    await deps.orm.em.fork().transactional(async (em) => {
      // Deliveries go by the foreign key's cascade; a run still waiting finds none and stops.
      if (!(await em.nativeDelete(WebhookEndpoint, { id: w.id, organizationId: a.organization.id }))) throw notFound('webhook');
      audit(em, a, 'webhook.deleted', { type: 'webhook', id: w.id }, { url: w.url });
    });
    ctx.body = { ...presentWebhook(w), deleted: true };
  });

  router.post('/webhooks/:id/rotate-secret', admin, async (ctx) => {
    const a = auth(ctx);
    const w = await find(ctx);
    const secret = newWebhookSecret();
    const now = new Date();
    const until = new Date(now.getTime() + ROTATION_OVERLAP_MS);
    await deps.orm.em.fork().transactional(async (em) => {
      // The current secret becomes the previous one in the same statement, so two rotations in a
      // row leave the one in between signing, never a secret nobody saw.
      const changed = await em.execute(
        `update webhook_endpoints set previous_secret_enc = secret_enc, previous_secret_until = ?, secret_enc = ?, updated_at = ?
          where id = ? and organization_id = ?`,
        [until, secrets.encrypt(secret), now, w.id, a.organization.id],
        'run',
      );
      if (!(changed as { affectedRows?: number }).affectedRows) throw notFound('webhook');
      audit(em, a, 'webhook.secret_rotated', { type: 'webhook', id: w.id }, { previous_secret_until: until.toISOString() });
    });
    // The endpoint as it is now: its updated_at is the rotation's.
    w.updatedAt = now;
    ctx.body = { ...presentWebhook(w), secret, previous_secret_expires_at: until.toISOString() };
  });

  router.get('/webhooks/:id/deliveries', admin, async (ctx) => {
    const w = await find(ctx);
    const q = validateQuery(deliveriesQuerySchema, ctx.query);
    const rows = await deps.orm.em.fork().find(
      WebhookDelivery,
      {
        endpointId: w.id,
        organizationId: w.organizationId,
        ...(q.status ? { status: q.status as DeliveryStatus } : {}),
        ...olderThanCursor(q.cursor),
      } as FilterQuery<WebhookDelivery>,
      { orderBy: { createdAt: 'desc', id: 'desc' }, limit: q.limit + 1 },
    );
    const { page, nextCursor } = pageOf(rows, q.limit);
    ctx.body = listBody(page.map(presentDelivery), nextCursor);
  });

  /** Starts the next run of the chosen deliveries, wakes the runs they supersede, audit-logged. */
  async function requeue(
    ctx: ApiContext,
    w: WebhookEndpoint,
    which: { deliveryId: string } | { failedSince: Date },
    action: string,
    details: Record<string, unknown>,
  ) {
    if (!w.enabled) throw new ServiceError('webhook_disabled', 'the webhook is disabled; enable it (PATCH enabled: true) first');
    const a = auth(ctx);
    const rows = await deps.orm.em.fork().transactional(async (em) => {
      const requeued = await requeueWebhookDeliveries(em, { endpointId: w.id, organizationId: a.organization.id, ...which });
      if (requeued.length || !('deliveryId' in which)) {
        audit(em, a, action, { type: 'webhook', id: w.id }, { ...details, requeued: requeued.length });
      }
      return requeued;
    });
    deps.webhooks.dispatch();
    // Best effort: a superseded run left waiting stops by itself at its next attempt anyway.
    await Promise.all(
      rows.map((r) => deps.engine.signal(webhookDeliveryWorkflowId(r.id, r.previous_run), WAKE_SIGNAL).catch(() => undefined)),
    );
    return rows;
  }

  router.post('/webhooks/:id/deliveries/:delivery_id/retry', admin, async (ctx) => {
    const w = await find(ctx);
    const deliveryId = ctx.params.delivery_id;
    if (!isUuid(deliveryId)) throw notFound('delivery');
    const rows = await requeue(ctx, w, { deliveryId: deliveryId.toLowerCase() }, 'webhook.delivery_retried', { delivery_id: deliveryId });
    if (!rows.length) throw notFound('delivery');
    const d = await deps.orm.em.fork().findOneOrFail(WebhookDelivery, { id: rows[0].id });
    ctx.status = 202;
    ctx.body = presentDelivery(d);
  });

  router.post('/webhooks/:id/recover', admin, async (ctx) => {
    const w = await find(ctx);
    const body = await readValidBody(ctx, recoverSchema, deps.maxBodyBytes);
    const since = parseTimestamp(body.since)!;
    const rows = await requeue(ctx, w, { failedSince: since }, 'webhook.recovered', { since: since.toISOString() });
    ctx.status = 202;
    ctx.body = { object: 'webhook_recovery', webhook_id: w.id, since: since.toISOString(), requeued: rows.length };
  });

  return router;
}
