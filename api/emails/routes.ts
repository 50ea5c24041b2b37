import type Koa from 'koa';
import Router from '@koa/router';
import type { Orm } from '../../db/orm';
import { Email, EmailEvent, Attachment } from '../../db/entities';
import type { Engine } from '../../worker/engine';
import type { Logger } from '../../server/logger';
import { isUuid } from '../../server/ids';
import { ApiError, notFound, validationError } from '../errors';
import { auth, authenticate, type AuthState, type Credentials } from '../middleware/auth';
import { readJsonBody } from '../middleware/json-body';
import { validateQuery } from '../validate';
import { prepareEmail, type PreparedEmail } from './prepare';
import { acceptEmails, type AcceptDeps } from './accept';
import { GroupStore } from './group-store';
import { listEmailsQuerySchema, type ListEmailsQuery } from './schema';
import { presentEmail, presentSummary, type SummaryRow } from './present';
import { decodeCursor, encodeCursor } from '../cursor';

export interface EmailRoutesDeps {
  orm: Orm;
  engine: Engine;
  log: Logger;
  maxBodyBytes: number;
  dispatch: () => void;
}

const MAX_BATCH = 100;

/** Messages a key may see: its organization's, and only its domains' when it is restricted. */
function scope(a: AuthState) {
  return { organizationId: a.organization.id, ...(a.key.domainIds !== null ? { domainId: { $in: a.key.domainIds } } : {}) };
}

export function emailRoutes(deps: EmailRoutesDeps): Router {
  const router = new Router();
  const { orm } = deps;
  const accept: AcceptDeps = { orm, dispatch: deps.dispatch, store: new GroupStore(orm, deps.log) };
  // No permission check: every tier (SEND, FULL, ADMIN) may send, read and cancel mail.

  /**
   * The send routes leave authentication to the statement that stores the mail (one round trip).
   * A request refused before that statement is authenticated and charged first, so a bad key
   * still answers 401 (or 429) ahead of any complaint about the body.
   */
  async function beforeStore<T>(ctx: Koa.Context, cost: () => number, batch: boolean, work: () => Promise<T> | T): Promise<T> {
    try {
      return await work();
    } catch (err) {
      // A large body's key was checked before reading, without a charge: charge it now.
      if (!ctx.state.charged) await authenticate(orm, ctx, (ctx.state.credentials as Credentials).tokenHash, cost(), batch);
      throw err;
    }
  }

  router.post('/emails', async (ctx) => {
    const prepared = await beforeStore(
      ctx,
      () => 1,
      false,
      async () => {
        const body = await readJsonBody(ctx, deps.maxBodyBytes);
        const headerKey = ctx.get('idempotency-key');
        if (ctx.headers['idempotency-key'] !== undefined && (headerKey.length < 1 || headerKey.length > 256)) {
          throw validationError('Idempotency-Key must be 1 to 256 characters', [
            { field: 'Idempotency-Key', message: '1 to 256 characters' },
          ]);
        }
        return prepareEmail(body, { inBatch: false, headerIdempotencyKey: headerKey || undefined, now: new Date() });
      },
    );
    const [result] = await acceptEmails(accept, ctx.state.credentials as Credentials, [prepared], { cost: 1, batch: false });
    if (result instanceof ApiError) throw result;
    if (result.replayed) ctx.set('Idempotent-Replayed', 'true');
    ctx.body = { id: result.id, ...(result.suppressed.length ? { suppressed: result.suppressed } : {}) };
  });

  router.post('/emails/batch', async (ctx) => {
    // A batch costs one request per message (up to 100), and at least one.
    let cost = 1;
    const body = await beforeStore(
      ctx,
      () => cost,
      true,
      async () => {
        const body = await readJsonBody(ctx, deps.maxBodyBytes);
        if (!Array.isArray(body)) throw validationError('batch body must be a JSON array of emails');
        cost = Math.max(1, Math.min(body.length, MAX_BATCH));
        if (body.length < 1 || body.length > MAX_BATCH) throw validationError(`a batch holds 1 to ${MAX_BATCH} emails, got ${body.length}`);
        return body as unknown[];
      },
    );
    const now = new Date();
    const outcome: ({ prepared: PreparedEmail } | { error: ApiError })[] = body.map((item) => {
      try {
        return { prepared: prepareEmail(item, { inBatch: true, now }) };
      } catch (err) {
        if (err instanceof ApiError) return { error: err };
        throw err;
      }
    });
    const ok = outcome.filter((o): o is { prepared: PreparedEmail } => 'prepared' in o);
    const accepted = await acceptEmails(
      accept,
      ctx.state.credentials as Credentials,
      ok.map((o) => o.prepared),
      { cost, batch: true },
    );
    let next = 0;
    ctx.body = {
      data: outcome.map((o) => {
        const r = 'error' in o ? o.error : accepted[next++];
        if (r instanceof ApiError) return { error: { code: r.code, message: r.message } };
        return { id: r.id, ...(r.suppressed.length ? { suppressed: r.suppressed } : {}) };
      }),
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
    const where: string[] = ['e.organization_id = ?'];
    const params: unknown[] = [a.organization.id];
    if (a.key.domainIds !== null) {
      where.push('e.domain_id = any(?::uuid[])');
      params.push(`{${a.key.domainIds.join(',')}}`);
    }
    if (q.status) {
      where.push('e.status = ?');
      params.push(q.status);
    }
    if (q.kind) {
      where.push('e.kind = ?');
      params.push(q.kind);
    }
    if (q.mode) {
      where.push('e.mode = ?');
      params.push(q.mode);
    }
    if (q.since) {
      where.push('e.created_at >= ?');
      params.push(new Date(q.since));
    }
    if (q.until) {
      where.push('e.created_at < ?');
      params.push(new Date(q.until));
    }
    if (q.to) {
      where.push('exists (select 1 from recipients r where r.email_id = e.id and r.address = ?)');
      params.push(q.to.trim().toLowerCase());
    }
    if (q.cursor) {
      const c = decodeCursor(q.cursor);
      where.push('(e.created_at, e.id) < (?, ?)');
      params.push(new Date(c.createdAt), c.id);
    }
    const limit = q.limit ?? 25;
    const rows: SummaryRow[] = await orm.em
      .fork()
      .getConnection()
      .execute(
        `select e.id, e.from_address, e.to_addresses, e.subject, e.status, e.mode, e.kind, e.created_at, e.sent_at
         from emails e where ${where.join(' and ')}
        order by e.created_at desc, e.id desc limit ${limit + 1}`,
        params,
      );
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    ctx.body = {
      object: 'list',
      data: page.map(presentSummary),
      ...(rows.length > limit && last
        ? { next_cursor: encodeCursor({ createdAt: new Date(last.created_at).toISOString(), id: last.id }) }
        : {}),
    };
  });

  router.post('/emails/:id/cancel', async (ctx) => {
    const a = auth(ctx);
    const id = ctx.params.id;
    if (!isUuid(id)) throw notFound('email');
    const em = orm.em.fork();
    // The same conditional update the worker's pick-up uses: exactly one of them wins.
    const won = await em.nativeUpdate(Email, { id, status: 'queued', ...scope(a) }, { status: 'canceled', updatedAt: new Date() });
    if (won === 0) {
      const email = await em.findOne(Email, { id, ...scope(a) }, { fields: ['status'] });
      if (!email) throw notFound('email');
      throw new ApiError(409, 'not_cancelable', `email is ${email.status}; only queued (including scheduled) email can be canceled`);
    }
    await deps.engine
      .signalCancel(id)
      .catch((err) =>
        deps.log.warn({ err, emailId: id }, 'cancel signal not delivered; the workflow sees the cancel when its timer fires'),
      );
    ctx.body = { id, object: 'email', status: 'canceled' };
  });

  return router;
}
