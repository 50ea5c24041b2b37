import { apiRouter } from '../state';
import { documentJson } from './document';

/**
 * GET /api/v1/openapi.json: the OpenAPI document, without an API key (api/app.ts mounts this router
 * before authentication). Built once per process.
 */
export function openApiRoutes() {
  const router = apiRouter('/api/v1');
  router.get('/openapi.json', (ctx) => {
    ctx.set('Cache-Control', 'no-cache');
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.type = 'application/json; charset=utf-8';
    ctx.body = documentJson();
  });
  return router;
}
