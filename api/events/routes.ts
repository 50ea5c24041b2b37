import type Router from '@koa/router';
import type { Logger } from 'pino';
import type { Orm } from '../../db/orm';
import { eventTestKeyRefused, GroupEvents, parseEvent, postEvent } from '../../core/automations/events';
import { authenticateRequest } from '../middleware/auth';
import { readJsonBody } from '../middleware/json-body';
import { apiRouter, auth, type ApiState } from '../state';

export interface EventRoutesDeps {
  orm: Orm;
  log: Logger;
  maxBodyBytes: number;
  /** Wakes the automation dispatcher (runs to start, waits to resume); it also polls. */
  automations?: () => void;
}

/** POST /events (spec): SEND keys and up; test keys 403. Authenticated and charged by the statement that records it. */
export function eventRoutes(deps: EventRoutesDeps): Router<ApiState> {
  const router = apiRouter();
  const events = new GroupEvents(deps.orm, deps.log);

  router.post('/events', async (ctx) => {
    const tokenHash = ctx.state.credentials?.tokenHash;
    if (!tokenHash) throw new Error('event reached without credentials');
    // A large body was read only after the key was known to exist: a test key is refused before it.
    if (ctx.state.auth?.key.mode === 'test') throw eventTestKeyRefused();
    let input;
    try {
      input = parseEvent(await readJsonBody(ctx, deps.maxBodyBytes));
    } catch (err) {
      // As for contact upserts: a request refused before its statement is authenticated and
      // charged first, so a bad key answers 401 (429, or 403 for a test key) ahead of the body.
      if (!ctx.state.auth) await authenticateRequest(deps.orm, ctx, tokenHash, 1, false);
      if (auth(ctx).key.mode === 'test') throw eventTestKeyRefused();
      throw err;
    }
    const r = await postEvent(events, tokenHash, input);
    if (r.runs > 0 || r.resumed > 0) deps.automations?.();
    ctx.status = 200;
    ctx.body = { id: r.id, runs: r.runs };
  });

  return router;
}
