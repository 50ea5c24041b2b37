import type Koa from 'koa';
import { randomUUID } from 'node:crypto';
import { ApiError } from '../errors';
import type { Logger } from '../../server/logger';

/** The one place errors become responses: `{"error": {"code", "message", "details"?}}`. */
export function errorMiddleware(log: Logger): Koa.Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      if (err instanceof ApiError) {
        ctx.status = err.status;
        if (err.headers) ctx.set(err.headers);
        ctx.body = { error: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) } };
        return;
      }
      // Anything else is our bug: hide it from the client, log it under an id they can quote.
      const errorId = randomUUID();
      log.error({ err, errorId, method: ctx.method, path: ctx.path }, 'unhandled error');
      ctx.status = 500;
      ctx.body = { error: { code: 'internal_error', message: `internal error; quote error id ${errorId}`, error_id: errorId } };
    }
  };
}
