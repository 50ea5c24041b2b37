import Router, { type RouterContext, type RouterMiddleware } from '@koa/router';
import type { AuthState, Charge } from '../core/auth';
import type { Credentials } from '../core/emails/accept';

/** What the API's middleware leaves on ctx.state for the routes. */
export interface ApiState {
  /** The key and organization; set by authentication (for sends, by the statement that stores them). */
  auth?: AuthState;
  /** Send routes: the token's hash, for the statement that authenticates and stores their mail. */
  credentials?: Credentials;
  /** What the request has been charged, when it was charged before its route ran (a batch's reservation). */
  charge?: Charge;
  /** The request's charge is settled: by its authentication, or by the statement its route handed it to (deferredAuth). */
  charged?: boolean;
  /** What a request that reserved more turned out to cost (reserveAuth gives back the rest). */
  cost?: number;
}

export type ApiContext = RouterContext<ApiState>;
export type ApiMiddleware = RouterMiddleware<ApiState>;

/** The authenticated key of a route behind authMiddleware. */
export function auth(ctx: { state: ApiState }): AuthState {
  if (!ctx.state.auth) throw new Error('route reached without authentication');
  return ctx.state.auth;
}

/**
 * Every router of the API: case-sensitive, so `/API/V1/...` or `/INBOX` is not a route at all
 * (404) rather than a route reached around middleware that matched on the exact path.
 */
export function apiRouter(prefix?: string): Router<ApiState> {
  return new Router<ApiState>({ sensitive: true, ...(prefix ? { prefix } : {}) });
}
