import type Router from '@koa/router';
import type { Logger } from 'pino';
import type { Orm } from '../../db/orm';
import { eventTestKeyRefused, GroupEvents, parseEvent, postEvent } from '../../core/automations/events';
import { deferredAuth } from '../middleware/auth';
import type { AuthState } from '../../core/auth';
import { readJsonBody } from '../middleware/json-body';
import { apiRouter, type ApiState } from '../state';

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

  const liveKey = (a: AuthState) => {
    if (a.key.mode === 'test') throw eventTestKeyRefused();
  };
  router.post('/events', deferredAuth(deps.orm, liveKey), async (ctx) => {
    const tokenHash = ctx.state.credentials!.tokenHash;
    const input = parseEvent(await readJsonBody(ctx, deps.maxBodyBytes));
    ctx.state.charged = true; // by the statement that records the event, which authenticates the request
    const r = await postEvent(events, tokenHash, input);
    if (r.runs > 0 || r.resumed > 0) deps.automations?.();
    ctx.status = 200;
    ctx.body = { id: r.id, runs: r.runs };
  });

  return router;
}
