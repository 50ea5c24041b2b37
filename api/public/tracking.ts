import { isbot } from 'isbot';
import type { Orm } from '../../db/orm';
import type { RecipientLinks } from '../../core/recipient-links';
import { recordEngagement } from '../../db/sql/record-engagement';
import { apiRouter } from '../state';
import { renderNotFound } from './page';

export interface TrackingRoutesDeps {
  orm: Orm;
  links: RecipientLinks;
}

/** A transparent 1×1 GIF. */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

/**
 * Open pixel and click redirect, served on the tracking hosts (CNAMEs to this server) and on the
 * API's own address alike: chosen by path, no API key, the signed token is the authority. Each
 * fetch records an event; scanners and prefetchers (by user agent, `isbot`) are recorded with
 * `detail: machine` so readers can tell them from people. A token we did not sign is 404 and
 * goes nowhere: the redirect target is inside the signature.
 */
export function trackingRoutes(deps: TrackingRoutesDeps) {
  const router = apiRouter();
  const machine = (ua: string | undefined) => !ua || isbot(ua);

  router.get('/t/o/:token', async (ctx) => {
    const t = deps.links.readPixel(ctx.params.token);
    if (!t) return renderNotFound(ctx);
    await recordEngagement(deps.orm, {
      emailId: t.emailId,
      type: 'opened',
      at: new Date(),
      machine: machine(ctx.get('user-agent')),
      url: null,
    });
    ctx.set('Cache-Control', 'no-store, private');
    ctx.type = 'image/gif';
    ctx.body = PIXEL;
  });

  router.get('/t/c/:token', async (ctx) => {
    const t = deps.links.readClick(ctx.params.token);
    const location = t && absoluteUrl(t.url);
    if (!t || !location) return renderNotFound(ctx);
    await recordEngagement(deps.orm, {
      emailId: t.emailId,
      type: 'clicked',
      at: new Date(),
      machine: machine(ctx.get('user-agent')),
      url: t.url,
    });
    ctx.set('Cache-Control', 'no-store, private');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.status = 302;
    ctx.set('Location', location);
  });

  return router;
}

/** The URL as a header may carry it (non-ASCII percent-encoded, the host in punycode), or null. */
function absoluteUrl(url: string): string | null {
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : null;
  } catch {
    return null;
  }
}
