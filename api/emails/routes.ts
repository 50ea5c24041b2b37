import type Router from '@koa/router';
import type { Logger } from 'pino';
import type { Orm } from '../../db/orm';
import { Email, EmailEvent, Attachment } from '../../db/entities';
import { isUuid } from '../../db/ids';
import { listEmails } from '../../db/sql/list-emails';
import { refundReservation } from '../../db/sql/refund-reservation';
import type { AuthState } from '../../core/auth';
import { ServiceError, notFound, validationError } from '../../core/errors';
import { isPlainObject } from '../../core/validate';
import { prepareEmail, type PreparedEmail } from '../../core/emails/prepare';
import type { Accepted, Credentials } from '../../core/emails/accept';
import type { GroupStore } from '../../core/emails/group-store';
import { acceptRendered, renderTemplatedEmails, replaysOfRefusedRenders } from '../../core/emails/render-templates';
import type { TemplateResolver } from '../../core/templates/resolver';
import { invalidKey } from '../../core/auth';
import { CANCEL_SIGNAL } from '../../workflows/send-email';
import type { Engine } from '../../worker/engine';
import { authenticateRequest } from '../middleware/auth';
import { readJsonBody } from '../middleware/json-body';
import { validateQuery } from '../validate';
import { apiRouter, auth, type ApiContext, type ApiState } from '../state';
import { listEmailsQuerySchema, type ListEmailsQuery } from './schema';
import { presentEmail, presentSummary } from './present';
import { decodeCursor, listBody, pageOf } from '../cursor';
import { parseTimestamp } from '../../core/time';

export interface EmailRoutesDeps {
  orm: Orm;
  engine: Engine;
  log: Logger;
  maxBodyBytes: number;
  dispatch: () => void;
  store: GroupStore;
  templates: TemplateResolver;
}

const MAX_BATCH = 100;

/** Messages a key may see: its organization's, and only its domains' when it is restricted. */
function scope(a: AuthState) {
  return { organizationId: a.organization.id, ...(a.key.domainIds !== null ? { domainId: { $in: a.key.domainIds } } : {}) };
}

const credentials = (ctx: ApiContext): Credentials => {
  if (!ctx.state.credentials) throw new Error('send route reached without credentials');
  return ctx.state.credentials;
};

export function emailRoutes(deps: EmailRoutesDeps): Router<ApiState> {
  const router = apiRouter();
  const { orm } = deps;
  const accept = { orm, dispatch: deps.dispatch, store: deps.store, templates: deps.templates };
  // No permission check: every tier (SEND, FULL, ADMIN) may send, read and cancel mail.

  router.post('/emails', async (ctx) => {
    let prepared: PreparedEmail | undefined;
    try {
      const body = await readJsonBody(ctx, deps.maxBodyBytes);
      const headerKey = ctx.get('idempotency-key');
      if (ctx.headers['idempotency-key'] !== undefined && (headerKey.length < 1 || headerKey.length > 256)) {
        throw validationError('Idempotency-Key must be 1 to 256 characters', [
          { field: 'Idempotency-Key', message: '1 to 256 characters' },
        ]);
      }
      prepared = prepareEmail(body, { inBatch: false, headerIdempotencyKey: headerKey || undefined, now: new Date() });
      if (prepared.template !== null) {
        const [rendered] = (await renderTemplatedEmails(deps.templates, credentials(ctx), [prepared])) ?? [invalidKey()];
        if (rendered instanceof ServiceError) throw rendered;
        prepared = rendered;
      }
    } catch (err) {
      // Authentication rides on the store statement (one round trip per send). A request refused
      // before it is authenticated and charged first, so a bad key still answers 401 (or 429)
      // ahead of any complaint about the body.
      if (!ctx.state.charge) await authenticateRequest(orm, ctx, credentials(ctx).tokenHash, 1, false);
      if (prepared?.idempotencyKey) {
        const replays = await replaysOfRefusedRenders(deps, auth(ctx).organization.id, [
          { idempotencyKey: prepared.idempotencyKey, result: err },
        ]);
        const replay = replays.get(0);
        if (replay) {
          ctx.set('Idempotent-Replayed', 'true');
          ctx.body = { id: replay.id };
          return;
        }
      }
      throw err;
    }
    const [result] = await acceptRendered(accept, credentials(ctx), credentials(ctx), [prepared], { cost: 1 });
    if (result instanceof ServiceError) throw result;
    if (result.replayed) ctx.set('Idempotent-Replayed', 'true');
    ctx.body = { id: result.id, ...(result.suppressed.length ? { suppressed: result.suppressed } : {}) };
  });

  router.post('/emails/batch', async (ctx) => {
    // The middleware reserved 100 (BATCH_RESERVATION); the batch costs one per message (at least one),
    // and the rest goes back to the key's window whatever the answer.
    let cost = 1;
    try {
      const body = await readJsonBody(ctx, deps.maxBodyBytes);
      if (!Array.isArray(body)) throw validationError('batch body must be a JSON array of emails');
      cost = Math.max(1, Math.min(body.length, MAX_BATCH));
      if (body.length < 1 || body.length > MAX_BATCH) throw validationError(`a batch holds 1 to ${MAX_BATCH} emails, got ${body.length}`);
      // Spec: a batch with attachments is refused as a whole, and nothing of it is stored.
      const withAttachments = body.findIndex((item) => isPlainObject(item) && Object.hasOwn(item, 'attachments'));
      if (withAttachments >= 0) {
        throw new ServiceError(
          'attachments_not_in_batch',
          'attachments are not accepted in batch requests; send such messages with POST /emails',
          [{ field: `[${withAttachments}].attachments`, message: 'not accepted in a batch' }],
        );
      }
      const now = new Date();
      const parsed = body.map((item): PreparedEmail | ServiceError => {
        try {
          return prepareEmail(item, { inBatch: true, now });
        } catch (err) {
          if (err instanceof ServiceError) return err;
          throw err;
        }
      });
      const valid = parsed.filter((p): p is PreparedEmail => !(p instanceof ServiceError));
      const scope = { organizationId: auth(ctx).organization.id };
      const rendered = (await renderTemplatedEmails(deps.templates, scope, valid))!;
      const replays = await replaysOfRefusedRenders(
        deps,
        scope.organizationId,
        valid.map((item, i) => ({ idempotencyKey: item.idempotencyKey, result: rendered[i] })),
      );
      let r = 0;
      const outcome: ({ prepared: PreparedEmail } | { error: ServiceError } | { replay: Accepted })[] = parsed.map((p) => {
        if (p instanceof ServiceError) return { error: p };
        const replay = replays.get(r);
        const item = rendered[r++];
        if (replay) return { replay };
        return item instanceof ServiceError ? { error: item } : { prepared: item };
      });
      const ok = outcome.filter((o): o is { prepared: PreparedEmail } => 'prepared' in o);
      const accepted = await acceptRendered(
        accept,
        credentials(ctx),
        scope,
        ok.map((o) => o.prepared),
        { cost: 0, prepaid: true },
      );
      let next = 0;
      ctx.body = {
        data: outcome.map((o) => {
          const r = 'error' in o ? o.error : 'replay' in o ? o.replay : accepted[next++];
          if (r instanceof ServiceError) return { error: { code: r.code, message: r.message } };
          return { id: r.id, ...(r.suppressed.length ? { suppressed: r.suppressed } : {}) };
        }),
      };
    } finally {
      // What was reserved (by the route's own middleware) less what the batch cost.
      const charge = ctx.state.charge;
      if (charge) await refundReservation(orm, charge.keyId, charge.windowStart, charge.cost - cost);
    }
  });

  router.get('/emails/:id', async (ctx) => {
    const a = auth(ctx);
    const id = ctx.params.id;
    if (!isUuid(id)) throw notFound('email');
    const em = orm.em.fork();
    const email = await em.findOne(Email, { id, ...scope(a) }, { populate: ['html', 'text'] });
    if (!email) throw notFound('email');
    const [events, attachments] = await Promise.all([
      em.find(EmailEvent, { emailId: id }, { orderBy: { id: 'asc' } }),
      em.find(Attachment, { emailId: id }, { orderBy: { position: 'asc' } }),
    ]);
    ctx.body = presentEmail(email, events, attachments);
  });

  router.get('/emails', async (ctx) => {
    const a = auth(ctx);
    const q: ListEmailsQuery = validateQuery(listEmailsQuerySchema, ctx.query);
    const limit = q.limit ?? 25;
    const rows = await listEmails(orm, {
      organizationId: a.organization.id,
      domainIds: a.key.domainIds,
      status: q.status,
      kind: q.kind,
      mode: q.mode,
      since: q.since !== undefined ? parseTimestamp(q.since)! : undefined,
      until: q.until !== undefined ? parseTimestamp(q.until)! : undefined,
      to: q.to?.trim().toLowerCase(),
      after: q.cursor !== undefined ? decodeCursor(q.cursor) : undefined,
      limit,
    });
    const { page, nextCursor } = pageOf(rows, limit, (r) => ({ createdAt: r.created_at, id: r.id }));
    ctx.body = listBody(page.map(presentSummary), nextCursor);
  });

  router.post('/emails/:id/cancel', async (ctx) => {
    const a = auth(ctx);
    const id = ctx.params.id;
    if (!isUuid(id)) throw notFound('email');
    const em = orm.em.fork();
    // The same conditional update the worker's pick-up uses: exactly one of them wins. A message
    // parked behind a daily cap leaves the park, so the outbox starts its workflow, which ends at once.
    const won = await em.nativeUpdate(
      Email,
      { id, status: 'queued', ...scope(a) },
      { status: 'canceled', waitingReason: null, waitingUntil: null, updatedAt: new Date() },
    );
    if (won === 0) {
      const email = await em.findOne(Email, { id, ...scope(a) }, { fields: ['status'] });
      if (!email) throw notFound('email');
      throw new ServiceError('not_cancelable', `email is ${email.status}; only queued (including scheduled) email can be canceled`);
    }
    // Only a started workflow can be waiting; one still in the outbox sees `canceled` when it starts.
    const started = await em.findOne(Email, { id }, { fields: ['enqueuedAt'] });
    if (started?.enqueuedAt) {
      await deps.engine
        .signal(id, CANCEL_SIGNAL)
        .catch((err) =>
          deps.log.warn({ err, emailId: id }, 'cancel signal not delivered; the workflow sees the cancel when its timer fires'),
        );
    }
    deps.dispatch();
    ctx.body = { id, object: 'email', status: 'canceled' };
  });

  return router;
}
