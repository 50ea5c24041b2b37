import type { Orm } from '../../db/orm';
import type { Permission } from '../../db/entities';
import { authenticate, invalidKey } from '../../core/auth';
import { ServiceError } from '../../core/errors';
import { bearerToken, hashToken, TOKEN_RE } from '../../core/tokens';
import { matchedRoute, type ApiContext, type ApiMiddleware } from '../state';

/** POST /emails: authenticated and charged by the statement that stores the mail. */
const SEND_ROUTE = '/api/v1/emails';
/** POST /contacts: authenticated and charged by the upsert statement, as a send. */
const CONTACT_UPSERT_ROUTE = '/api/v1/contacts';
/** POST /events: authenticated and charged by the statement that records it, as a send. */
const EVENT_ROUTE = '/api/v1/events';
/** POST /emails/batch: reserves BATCH_RESERVATION before its body is read (spec, Limits → Batch cost). */
const BATCH_ROUTE = '/api/v1/emails/batch';
/** The most a batch can cost (100 messages); what is not used is given back once the body is known. */
export const BATCH_RESERVATION = 100;
/**
 * Bodies up to this size are read before the key is known (their authentication rides on the
 * store statement, saving a round trip per send); larger ones, or ones of unknown length, are
 * read only once the key is known to exist.
 */
const DEFERRED_AUTH_MAX_BODY = 256 * 1024;

/** Authenticates and charges `cost` on behalf of a request, leaving the key (and the charge) on its state. */
export async function authenticateRequest(orm: Orm, ctx: ApiContext, tokenHash: string, cost: number, batch: boolean): Promise<void> {
  const { auth, charge } = await authenticate(orm, tokenHash, cost, batch);
  ctx.state.auth = auth;
  if (cost > 0) ctx.state.charge = charge;
}

/** Bearer authentication and the per-key rate limit: the token is looked up by its SHA-256, never stored in clear. */
export function authMiddleware(orm: Orm): ApiMiddleware {
  return async (ctx, next) => {
    const token = bearerToken(ctx.get('authorization'));
    if (token === null) throw new ServiceError('missing_api_key', 'send your API key as "Authorization: Bearer <API_KEY>"');
    if (!TOKEN_RE.test(token)) throw invalidKey();
    const tokenHash = hashToken(token);
    // By the route the router matched, not by the raw path: the route is what will run.
    const route = ctx.method === 'POST' ? matchedRoute(ctx) : undefined;
    ctx.state.credentials = { tokenHash };
    if (route === BATCH_ROUTE) {
      // Reserved before the body is read: of concurrent batches in a second only the first passes.
      await authenticateRequest(orm, ctx, tokenHash, BATCH_RESERVATION, true);
      return next();
    }
    if (route === SEND_ROUTE || route === CONTACT_UPSERT_ROUTE || route === EVENT_ROUTE) {
      const declared = Number(ctx.get('content-length') || NaN);
      // Cost 0: only whether the key exists; the store (or upsert) statement charges.
      if (!(declared <= DEFERRED_AUTH_MAX_BODY)) await authenticateRequest(orm, ctx, tokenHash, 0, false);
      return next();
    }
    await authenticateRequest(orm, ctx, tokenHash, 1, false);
    await next();
  };
}

const RANK: Record<Permission, number> = { send: 0, full: 1, admin: 2 };

/** Tiers are ordered: FULL can do what SEND can, ADMIN what FULL can. */
export function requirePermission(permission: Permission): ApiMiddleware {
  return async (ctx, next) => {
    const key = ctx.state.auth?.key;
    if (!key) throw new Error('requirePermission before authentication');
    if (permission === 'admin' && key.mode === 'test') {
      throw new ServiceError('test_key_not_allowed', 'test keys cannot use management endpoints');
    }
    if (RANK[key.permission] < RANK[permission]) {
      throw new ServiceError('forbidden', `this endpoint needs a ${permission.toUpperCase()} key`);
    }
    await next();
  };
}
