import fs from 'node:fs';
import path from 'node:path';
import compose from 'koa-compose';
import type Koa from 'koa';
import type Router from '@koa/router';
import { refusal, securityHeaders } from './layout';
import { consoleBase, orgScope, platformOnly, requireSession } from './middleware';
import { consoleRouter, type ConsoleDeps, type ConsoleState } from './state';
import { signInRoutes } from './pages/sign-in';
import { accountRoutes } from './pages/account';
import { messageRoutes } from './pages/messages';
import { overviewRoutes } from './pages/overview';
import { organizationRoutes } from './pages/organizations';
import { unconfirmedRoutes } from './pages/unconfirmed';
import { keyRoutes } from './pages/keys';
import { domainRoutes } from './pages/domains';
import { audienceRoutes } from './pages/audience';
import { webhookRoutes } from './pages/webhooks';
import { suppressionRoutes } from './pages/suppressions';
import { broadcastRoutes } from './pages/broadcasts';
import { auditRoutes } from './pages/audit';
import { deliveryRoutes } from './pages/delivery';
import { dkimRoutes } from './pages/domain-dkim';
import { mtaStsRoutes } from './pages/domain-mta-sts';
import { dnsPublishRoutes } from './pages/domain-dns-publish';
import { dmarcReportsRoutes } from './pages/domain-dmarc-reports';
import { dmarcRampRoutes } from './pages/domain-dmarc-ramp';

/** The console's two files, read once: served from 'self' so the policy needs no inline script or style. */
function assetRoutes(): Router<ConsoleState> {
  const router = consoleRouter();
  const dir = path.join(__dirname, 'assets');
  const files: Record<string, [string, string]> = {
    'console.css': ['text/css; charset=utf-8', fs.readFileSync(path.join(dir, 'console.css'), 'utf8')],
    'console.js': ['text/javascript; charset=utf-8', fs.readFileSync(path.join(dir, 'console.js'), 'utf8')],
  };
  router.get('/console/assets/:file', (ctx) => {
    const f = files[ctx.params.file];
    if (!f || !Object.hasOwn(files, ctx.params.file)) return refusal(ctx, 404, 'Not found.');
    securityHeaders(ctx);
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.type = f[0];
    ctx.body = f[1];
  });
  return router;
}

/** Runs the first router with a route for this path and method; false when none has one. */
function first(routers: Router<ConsoleState>[]): Koa.Middleware<ConsoleState> & { has(ctx: Koa.Context): boolean } {
  const has = (ctx: Koa.Context) => routers.some((r) => r.match(ctx.path, ctx.method).route);
  const mw: Koa.Middleware<ConsoleState> = async (ctx, next) => {
    const r = routers.find((x) => x.match(ctx.path, ctx.method).route);
    return r ? r.routes()(ctx as never, next) : next();
  };
  return Object.assign(mw, { has });
}

/**
 * The operator console at /console (docs/console.md): server-rendered pages over the API, called
 * in process. Open pages (sign-in, a set-password link, the two assets), then pages behind a
 * session, then pages of one organization behind its scope check.
 */
export function consoleMiddleware(deps: ConsoleDeps): Koa.Middleware {
  const home = consoleRouter();
  home.get('/console', (ctx) => ctx.redirect('/console/overview'));
  const open = first([assetRoutes(), signInRoutes(deps)]);
  const signedIn = first([home, accountRoutes(deps), overviewRoutes(deps)]);
  const platform = first([organizationRoutes(deps), unconfirmedRoutes(deps), deliveryRoutes(deps)]);
  const organization = first([
    messageRoutes(deps),
    keyRoutes(deps),
    domainRoutes(deps),
    audienceRoutes(deps),
    webhookRoutes(deps),
    suppressionRoutes(deps),
    broadcastRoutes(deps),
    auditRoutes(deps),
    dkimRoutes(deps),
    mtaStsRoutes(deps),
    dnsPublishRoutes(deps),
    dmarcReportsRoutes(deps),
    dmarcRampRoutes(deps),
  ]);
  const inOrg = /^\/console\/o\/([^/]+)(\/|$)/;
  const scope = orgScope(deps);

  const notFound: Koa.Middleware<ConsoleState> = async (ctx) => refusal(ctx as never, 404, 'There is no such page.');
  const guarded = compose<Koa.ParameterizedContext<ConsoleState>>([
    requireSession as never,
    async (ctx, next) => {
      if (signedIn.has(ctx)) return signedIn(ctx, next);
      if (platform.has(ctx)) return platformOnly(ctx as never, () => platform(ctx, next));
      const m = inOrg.exec(ctx.path);
      if (m && organization.has(ctx)) {
        (ctx as unknown as { params: Record<string, string> }).params = { org: m[1] };
        return scope(ctx as never, () => organization(ctx, next));
      }
      return notFound(ctx, next);
    },
  ]);
  const base = consoleBase(deps);
  return async (ctx, next) => {
    if (ctx.path !== '/console' && !ctx.path.startsWith('/console/')) return next();
    await base(ctx as never, async () => {
      if (open.has(ctx)) return open(ctx, async () => undefined);
      return guarded(ctx, async () => undefined);
    });
  };
}
