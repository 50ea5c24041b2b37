import Koa from 'koa';
import type { Logger } from 'pino';
import type { GroupStore } from '../core/emails/group-store';
import type { Orm } from '../db/orm';
import type { Engine } from '../worker/engine';
import type { DevInbox } from '../smtp/dev-inbox';
import { ServiceError } from '../core/errors';
import { errorMiddleware } from './middleware/errors';
import { authMiddleware } from './middleware/auth';
import { apiRouter, type ApiState } from './state';
import { healthRoutes } from './health';
import { emailRoutes } from './emails/routes';
import { keyRoutes } from './keys/routes';
import { domainRoutes, type DomainRoutesDeps } from './domains/routes';
import { auditLogRoutes } from './audit-log/routes';
import { organizationRoutes } from './organization/routes';
import { inboxRoutes } from './inbox/routes';
import { contactRoutes } from './contacts/routes';
import { topicRoutes } from './topics/routes';
import { segmentRoutes } from './segments/routes';
import { templateRoutes } from './templates/routes';
import { webhookRoutes, type WebhookRoutesDeps } from './webhooks/routes';
import { suppressionRoutes } from './suppressions/routes';
import { broadcastRoutes } from './broadcasts/routes';
import { eventRoutes } from './events/routes';
import { automationRoutes } from './automations/routes';
import { TemplateResolver } from '../core/templates/resolver';
import type { CapsSettings } from '../core/limits/usage';
import type { RecipientLinks } from '../core/recipient-links';
import { unsubscribeRoutes } from './public/unsubscribe';
import { trackingRoutes } from './public/tracking';
import { mtaStsRoutes } from './public/mta-sts';
import { consoleMiddleware } from '../console/routes';
import { openApiRoutes } from './openapi/routes';
import { docsRoutes } from './openapi/docs';
import { ConsoleApi } from '../console/api';
import type { ConsoleDeps } from '../console/state';

export interface AppDeps {
  orm: Orm;
  engine: Engine;
  log: Logger;
  maxBodyBytes: number;
  dispatch: () => void;
  /** The process's group commit for sends, shared with the SMTP relay so both ride the same statements. */
  store: GroupStore;
  inbox?: DevInbox;
  /** The API listens beyond loopback: the development inbox then needs an ADMIN key. */
  inboxAdminOnly?: boolean;
  domains: DomainRoutesDeps['domains'];
  /** The daily caps as the API shows them (organization usage, domain warm-up, parked mail). */
  caps: CapsSettings;
  webhooks: WebhookRoutesDeps['webhooks'];
  /** Wakes the broadcast dispatcher after a broadcast is created. */
  startBroadcasts?: () => void;
  /** Wakes the automation dispatcher: runs to start, waits resumed, runs canceled, trigger rows written. */
  automations?: () => void;
  /** Reads the signed tokens of unsubscribe and tracking links. */
  links: RecipientLinks;
  /** The operator console at /console (absent: no console, as in API-only tests). */
  console?: Omit<ConsoleDeps, 'orm' | 'log' | 'api' | 'caps' | 'engine'>;
}

export function createApp(deps: AppDeps): Koa<ApiState> {
  const app = new Koa<ApiState>();
  app.proxy = false;
  // Errors are rendered by errorMiddleware and logged there with an id; silence Koa's own printing.
  app.silent = true;
  app.use(errorMiddleware(deps.log));
  if (deps.console) {
    // The console calls this same app in process; its handler is taken once every route is mounted.
    let handler: ReturnType<typeof app.callback> | undefined;
    const api = new ConsoleApi(() => (handler ??= app.callback()));
    app.use(consoleMiddleware({ ...deps.console, orm: deps.orm, log: deps.log, caps: deps.caps, engine: deps.engine, api }));
  }

  const root = healthRoutes(deps);
  app.use(root.routes());
  // Recipients' links: no API key, the signed token in the path is the authority.
  const recipients = [unsubscribeRoutes(deps), trackingRoutes(deps), mtaStsRoutes(deps)];
  for (const r of recipients) app.use(r.routes());
  if (deps.inbox) app.use(inboxRoutes(deps.inbox, deps.inboxAdminOnly ? { adminOnly: deps.orm } : {}).routes());
  // The OpenAPI document and its reference page: no API key, so before authMiddleware.
  const reference = [openApiRoutes(), docsRoutes()];
  for (const r of reference) app.use(r.routes());

  const api = apiRouter('/api/v1');
  api.use(authMiddleware(deps.orm));
  // One cache of compiled template versions for sends and previews.
  const templates = new TemplateResolver(deps.orm);
  const emails = emailRoutes({ ...deps, templates });
  api.use(emails.routes());
  api.use(keyRoutes(deps).routes());
  // A check that verifies a domain hosts its MTA-STS policy, whose records name the console's PUBLIC_URL.
  api.use(domainRoutes({ ...deps, domains: { publicBase: deps.console?.publicBase, ...deps.domains } }).routes());
  api.use(organizationRoutes(deps).routes());
  api.use(auditLogRoutes(deps).routes());
  api.use(contactRoutes(deps).routes());
  api.use(topicRoutes(deps).routes());
  api.use(segmentRoutes(deps).routes());
  api.use(templateRoutes({ ...deps, templates }).routes());
  api.use(webhookRoutes(deps).routes());
  api.use(suppressionRoutes(deps).routes());
  api.use(broadcastRoutes({ ...deps, templates }).routes());
  api.use(eventRoutes(deps).routes());
  api.use(automationRoutes({ ...deps, templates }).routes());
  app.use(api.routes());

  const routed = [root, ...recipients, ...reference, api];
  app.use((ctx) => {
    // A known path with another method is 405, anything else 404.
    const allowed = routed.flatMap((r) => r.match(ctx.path, ctx.method).path).filter((l) => l.methods.length > 0);
    if (allowed.length > 0) {
      ctx.set('Allow', [...new Set(allowed.flatMap((l) => l.methods))].join(', '));
      throw new ServiceError('method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}`);
    }
    throw new ServiceError('route_not_found', `no route for ${ctx.method} ${ctx.path}`);
  });
  return app;
}
