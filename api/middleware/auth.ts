import type { Orm } from '../../db/orm';
import type { Permission } from '../../db/entities';
import { refundReservation } from '../../db/sql/refund-reservation';
import { CONSOLE_AUTH, authenticate, invalidKey, type AuthState } from '../../core/auth';
import { ServiceError } from '../../core/errors';
import { bearerToken, hashToken, TOKEN_RE } from '../../core/tokens';
import type { ApiContext, ApiMiddleware } from '../state';

/**
 * Authentication. Every API route is authenticated and charged one before it runs (authMiddleware),
 * unless it mounts its own: `reserveAuth` (a batch reserves its most before its body is read) or
 * `deferredAuth` (the route's own statement authenticates and charges, saving a round trip).
 */

/**
 * Bodies up to this size are read before the key is known (their authentication rides on the
 * route's statement); larger ones, or ones of unknown length, are read only once the key is known
 * to exist.
 */
const DEFERRED_AUTH_MAX_BODY = 256 * 1024;

/** Marks the middleware that authenticates its route, so authMiddleware leaves that route to it. */
const OWN_AUTH = Symbol('authenticates its route');
const ownAuth = (mw: ApiMiddleware): ApiMiddleware => Object.assign(mw, { [OWN_AUTH]: true });

/** The route that will run (the first the request matched with its method) mounts its own authentication. */
function mountsOwnAuth(ctx: ApiContext): boolean {
  const route = (ctx.matched ?? []).find((l) => l.methods.includes(ctx.method));
  return route?.stack.some((fn) => OWN_AUTH in fn) ?? false;
}

/** Authenticates and charges `cost` on behalf of a request, leaving the key (and the charge) on its state. */
export async function authenticateRequest(orm: Orm, ctx: ApiContext, tokenHash: string, cost: number, batch: boolean): Promise<AuthState> {
  const { auth, charge } = await authenticate(orm, tokenHash, cost, batch);
  ctx.state.auth = auth;
  if (cost > 0) {
    ctx.state.charge = charge;
    ctx.state.charged = true;
  }
  return auth;
}

const tokenHashOf = (ctx: ApiContext): string => {
  if (!ctx.state.credentials) throw new Error('authentication mounted before authMiddleware');
  return ctx.state.credentials.tokenHash;
};

/** Bearer authentication and the per-key rate limit: the token is looked up by its SHA-256, never stored in clear. */
export function authMiddleware(orm: Orm): ApiMiddleware {
  return async (ctx, next) => {
    const operator = (ctx.req as { [CONSOLE_AUTH]?: AuthState })[CONSOLE_AUTH];
    if (operator) {
      // Routes that authenticate through their own statement take a key's token; the console has none.
      if (mountsOwnAuth(ctx)) throw new ServiceError('forbidden', 'this endpoint takes an API key');
      ctx.state.auth = operator;
      ctx.state.charged = true;
      return next();
    }
    const token = bearerToken(ctx.get('authorization'));
    if (token === null) throw new ServiceError('missing_api_key', 'send your API key as "Authorization: Bearer <API_KEY>"');
    if (!TOKEN_RE.test(token)) throw invalidKey();
    const tokenHash = hashToken(token);
    ctx.state.credentials = { tokenHash };
    if (!mountsOwnAuth(ctx)) await authenticateRequest(orm, ctx, tokenHash, 1, false);
    await next();
  };
}

/**
 * Reserves `tokens` of the key's window before the body is read (spec, Limits → Batch cost): of
 * concurrent batches in a second only the first passes. What the request turns out to cost
 * (ctx.state.cost, one when it never says) is kept; the rest goes back whatever the answer.
 */
export function reserveAuth(orm: Orm, tokens: number): ApiMiddleware {
  return ownAuth(async (ctx, next) => {
    await authenticateRequest(orm, ctx, tokenHashOf(ctx), tokens, true);
    try {
      await next();
    } finally {
      const charge = ctx.state.charge!;
      await refundReservation(orm, charge.keyId, charge.windowStart, charge.cost - (ctx.state.cost ?? 1));
    }
  });
}

/**
 * For routes whose own statement authenticates and charges the request (sends, contact upserts,
 * events): one round trip instead of two. A body over DEFERRED_AUTH_MAX_BODY is read only once the
 * key is known to exist (cost 0). A request refused before its statement runs (the route sets
 * ctx.state.charged when it hands over) is authenticated and charged first, so a bad key answers
 * 401 or 429, then `admit`'s refusal (a test key's 403), ahead of any complaint about the body.
 */
export function deferredAuth(orm: Orm, admit: (a: AuthState) => void = () => undefined): ApiMiddleware {
  return ownAuth(async (ctx, next) => {
    const tokenHash = tokenHashOf(ctx);
    const declared = Number(ctx.get('content-length') || NaN);
    if (!(declared <= DEFERRED_AUTH_MAX_BODY)) admit(await authenticateRequest(orm, ctx, tokenHash, 0, false));
    try {
      await next();
    } catch (err) {
      if (!ctx.state.charged) admit(await authenticateRequest(orm, ctx, tokenHash, 1, false));
      throw err;
    }
  });
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
      throw new ServiceError('forbidden', `this endpoint needs ${permission === 'admin' ? 'an' : 'a'} ${permission.toUpperCase()} key`);
    }
    await next();
  };
}
