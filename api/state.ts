import type { RouterContext, RouterMiddleware } from '@koa/router';
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
}

export type ApiContext = RouterContext<ApiState>;
export type ApiMiddleware = RouterMiddleware<ApiState>;

/** The authenticated key of a route behind authMiddleware. */
export function auth(ctx: { state: ApiState }): AuthState {
  if (!ctx.state.auth) throw new Error('route reached without authentication');
  return ctx.state.auth;
}
