import type { Orm } from '../db/orm';
import { ping } from '../db/sql/ping';
import type { Engine } from '../worker/engine';
import { apiRouter } from './state';

/** What both answers report: the database, the engine, and whether workers take the engine's work. */
async function look(deps: { orm: Orm; engine: Engine }) {
  const database = (await ping(deps.orm)) ? 'up' : 'down';
  const engine = deps.engine.ready() ? 'up' : 'down';
  // Absent: the engine's workers are this process (embedded).
  const workers = deps.engine.workers?.();
  return {
    up: database === 'up' && engine === 'up',
    // `unknown` (not checked yet, or the check failed) counts as working: the check may be what is broken.
    working: workers?.state !== 'none',
    parts: {
      database,
      engine: `${deps.engine.name}:${engine}`,
      workers: workers?.state ?? 'polling',
      ...(workers ? { task_queues: workers.queues } : {}),
    },
  };
}

/**
 * GET /health, liveness: 200 while the API serves, `degraded` when no worker polls (mail is
 * accepted and waits); 503 only with the database or the engine down. GET /ready, readiness:
 * 200 only when mail accepted now is also delivered now, else 503 (docs/operations.md).
 */
export function healthRoutes(deps: { orm: Orm; engine: Engine }) {
  const root = apiRouter();
  root.get('/health', async (ctx) => {
    const h = await look(deps);
    ctx.status = h.up ? 200 : 503;
    ctx.body = { status: !h.up ? 'unavailable' : h.working ? 'ok' : 'degraded', ...h.parts };
  });
  root.get('/ready', async (ctx) => {
    const h = await look(deps);
    const ready = h.up && h.working;
    ctx.status = ready ? 200 : 503;
    ctx.body = { status: ready ? 'ok' : 'unavailable', ...h.parts };
  });
  return root;
}
