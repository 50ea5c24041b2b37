import type Router from '@koa/router';
import type { Logger } from 'pino';
import type { Orm } from '../../db/orm';
import { Email, EmailEvent, Attachment } from '../../db/entities';
import { isUuid } from '../../db/ids';
import { cancelEmail } from '../../db/sql/cancel-emails';
import { listEmails } from '../../db/sql/list-emails';
import type { AuthState } from '../../core/auth';
import { ServiceError, notFound, validationError } from '../../core/errors';
import type { Credentials } from '../../core/emails/accept';
import type { GroupStore } from '../../core/emails/group-store';
import { submit } from '../../core/emails/submit';
import { MAX_BATCH } from '../../core/emails/schema';
import type { TemplateResolver } from '../../core/templates/resolver';
import { CANCEL_SIGNAL } from '../../workflows/send-email';
import type { Engine } from '../../worker/engine';
import { authenticateRequest, deferredAuth, reserveAuth } from '../middleware/auth';
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

/** Messages a key may see: its organization's, and only its domains' when it is restricted. */
function scope(a: AuthState) {
  return { organizationId: a.organization.id, ...(a.key.domainIds !== null ? { domainId: { $in: a.key.domainIds } } : {}) };
}

/** The Idempotency-Key header, when sent: 1 to 256 characters. */
function idempotencyKeyHeader(ctx: ApiContext): string | undefined {
  if (ctx.headers['idempotency-key'] === undefined) return undefined;
  const key = ctx.get('idempotency-key');
  if (key.length < 1 || key.length > 256) {
    throw validationError('Idempotency-Key must be 1 to 256 characters', [{ field: 'Idempotency-Key', message: '1 to 256 characters' }]);
  }
  return key || undefined;
}

const credentials = (ctx: ApiContext): Credentials => {
  if (!ctx.state.credentials) throw new Error('send route reached without credentials');
  return ctx.state.credentials;
};

export function emailRoutes(deps: EmailRoutesDeps): Router<ApiState> {
  const router = apiRouter();
  const { orm } = deps;
  // No permission check: every tier (SEND, FULL, ADMIN) may send, read and cancel mail.

  router.post('/emails', deferredAuth(orm), async (ctx) => {
    const { tokenHash } = credentials(ctx);
    const body = await readJsonBody(ctx, deps.maxBodyBytes);
    const idempotencyKey = idempotencyKeyHeader(ctx);
    ctx.state.charged = true; // by the store statement, or by `authenticate` when refused before it
    const [result] = await submit(deps, {
      credentials: { tokenHash },
      authenticate: async () => (await authenticateRequest(orm, ctx, tokenHash, 1, false)).organization.id,
      items: { one: body, idempotencyKey },
      payment: 'request',
      source: 'api',
    });
    if (result instanceof ServiceError) throw result;
    if (result.replayed) ctx.set('Idempotent-Replayed', 'true');
    ctx.body = { id: result.id, ...(result.suppressed.length ? { suppressed: result.suppressed } : {}) };
  });

  router.post('/emails/batch', reserveAuth(orm, MAX_BATCH), async (ctx) => {
    const results = await submit(deps, {
      credentials: credentials(ctx),
      organizationId: auth(ctx).organization.id,
      items: { batch: await readJsonBody(ctx, deps.maxBodyBytes) },
      payment: { reserved: (cost) => (ctx.state.cost = cost) },
      source: 'api',
    });
    ctx.body = {
      data: results.map((r) =>
        r instanceof ServiceError
          ? { error: { code: r.code, message: r.message } }
          : { id: r.id, ...(r.suppressed.length ? { suppressed: r.suppressed } : {}) },
      ),
    };
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
    // The same conditional update the worker's pick-up uses: exactly one of them wins. A message
    // parked behind a daily cap leaves the park, so the outbox starts its workflow, which ends at once.
    const { canceled, status, started } = await cancelEmail(orm, {
      id,
      organizationId: a.organization.id,
      domainIds: a.key.domainIds,
      now: new Date(),
    });
    if (!canceled) {
      if (status === null) throw notFound('email');
      throw new ServiceError('not_cancelable', `email is ${status}; only queued (including scheduled) email can be canceled`);
    }
    // Only a started workflow can be waiting; one still in the outbox sees `canceled` when it starts.
    if (started) {
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
