import type Koa from 'koa';
import type { Logger } from 'pino';
import { randomUUID } from 'node:crypto';
import { ServiceError } from '../../core/errors';

/** The one place errors become responses: `{"error": {"code", "message", "details"?}}`, status from the catalogue. */
export function errorMiddleware(log: Logger): Koa.Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      if (err instanceof ServiceError) {
        ctx.status = err.status;
        if (err.headers) ctx.set(err.headers);
        ctx.body = { error: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) } };
        return;
      }
      // Anything else is our bug: hide it from the client, log it under an id they can quote. The
      // route pattern, not the path, which may hold the caller's values (ids, addresses).
      const errorId = randomUUID();
      const route = (ctx as { _matchedRoute?: string })._matchedRoute ?? 'unrouted';
      log.error({ err, errorId, method: ctx.method, route }, 'unhandled error');
      ctx.status = 500;
      ctx.body = { error: { code: 'internal_error', message: `internal error; quote error id ${errorId}`, error_id: errorId } };
    }
  };
}
