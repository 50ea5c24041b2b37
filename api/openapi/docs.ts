import fs from 'node:fs';
import { apiRouter } from '../state';

/**
 * GET /docs: the API reference, Redoc (redoc's standalone bundle, served from here: no CDN) reading
 * /api/v1/openapi.json. Redoc renders its styles inline and runs its search in a worker made from a
 * blob, so this page's policy allows those two; scripts come from this server only.
 */
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>svc-mail API reference</title>
</head>
<body>
<redoc spec-url="/api/v1/openapi.json" path-in-middle-panel="true" required-props-first="true"></redoc>
<script src="/docs/redoc.standalone.js"></script>
</body>
</html>
`;

/** The one resource the bundle loads from elsewhere (its footer's logo): an empty image instead. */
const REMOTE_LOGO = 'https://cdn.redoc.ly/redoc/logo-mini.svg';
const EMPTY_SVG = 'data:image/svg+xml,%3Csvg xmlns=%22http://www.w3.org/2000/svg%22/%3E';

let bundle: string | undefined;
/** The standalone bundle, read once, without its source map comment (the map is not served) nor the remote logo. */
function redocBundle(): string {
  return (bundle ??= fs
    .readFileSync(require.resolve('redoc/bundles/redoc.standalone.js'), 'utf8')
    .replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n')
    .replaceAll(REMOTE_LOGO, EMPTY_SVG));
}

export function docsRoutes() {
  const router = apiRouter('/docs');
  router.get('/', (ctx) => {
    ctx.set('Content-Security-Policy', CSP);
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'same-origin');
    ctx.set('Cache-Control', 'no-cache');
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = PAGE;
  });
  router.get('/redoc.standalone.js', (ctx) => {
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.type = 'text/javascript; charset=utf-8';
    ctx.body = redocBundle();
  });
  return router;
}
