import { randomUUID, timingSafeEqual } from 'node:crypto';
import { resolveSession } from '../core/console/sessions';
import { Organization } from '../db/entities';
import { isUuid } from '../db/ids';
import { operatorAuth } from './api';
import { html } from './html';
import { document, refusal, seeOther } from './layout';
import type { ConsoleDeps, ConsoleMiddleware } from './state';

/** A form is a few fields; anything larger is not one of ours. */
const MAX_FORM_BYTES = 64 * 1024;

export const cookieName = (secure: boolean) => (secure ? '__Host-svc_console' : 'svc_console');

/**
 * The session cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's request
 * carries it), Secure when PUBLIC_URL is https. Written by hand: Koa refuses a Secure cookie on a
 * plain connection, which is what a TLS-terminating proxy in front of the service looks like.
 */
export function setSessionCookie(ctx: Parameters<ConsoleMiddleware>[0], deps: ConsoleDeps, token: string | null): void {
  const parts = [
    `${cookieName(deps.secureCookies)}=${token ?? ''}`,
    'Path=/',
    'HttpOnly',
    'SameSite=Strict',
    ...(deps.secureCookies ? ['Secure'] : []),
    ...(token === null ? ['Max-Age=0'] : []),
  ];
  ctx.append('Set-Cookie', parts.join('; '));
}

async function readForm(ctx: Parameters<ConsoleMiddleware>[0]): Promise<URLSearchParams | null> {
  if (!ctx.is('application/x-www-form-urlencoded')) return null;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_FORM_BYTES) return null;
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  // PostgreSQL text holds no NUL: a form carrying one is not a form a person typed.
  return text.includes('%00') || text.includes('\u0000') ? null : new URLSearchParams(text);
}

/**
 * Around every console request: its own error page (HTML, an id to quote, never the cause), the
 * session from the cookie, a POST's form read once, and whether workers take the engine's work.
 */
export function consoleBase(deps: ConsoleDeps): ConsoleMiddleware {
  return async (ctx, next) => {
    try {
      ctx.state.session = (await resolveSession(deps.orm, ctx.cookies.get(cookieName(deps.secureCookies)), deps.policy)) ?? undefined;
      ctx.state.workers = deps.engine.workers?.();
      if (ctx.method === 'POST') {
        const form = await readForm(ctx);
        if (!form)
          return document(ctx, 400, 'Bad request', html`<main id="main" class="center"><h1>That form could not be read.</h1></main>`);
        ctx.state.form = form;
      }
      await next();
    } catch (err) {
      const errorId = randomUUID();
      deps.log.error(
        { err, errorId, method: ctx.method, route: (ctx as { _matchedRoute?: string })._matchedRoute ?? 'console' },
        'console error',
      );
      document(
        ctx,
        500,
        'Error',
        html`<main id="main" class="center">
          <h1>Something went wrong.</h1>
          <p>Quote error id <code>${errorId}</code> to your operator.</p>
        </main>`,
      );
    }
  };
}

const sameToken = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** Pages behind a session: none goes back to sign-in; a POST must carry the session's CSRF token. */
export const requireSession: ConsoleMiddleware = async (ctx, next) => {
  const s = ctx.state.session;
  if (!s) {
    const back = ctx.method === 'GET' && ctx.path.startsWith('/console/') ? `?next=${encodeURIComponent(ctx.path)}` : '';
    return seeOther(ctx, `/console/sign-in${back}`);
  }
  if (ctx.method === 'POST' && !sameToken(ctx.state.form?.get('_csrf') ?? '', s.csrf)) {
    return refusal(ctx, 403, 'This form is missing its security token or has expired. Reload the page and try again.');
  }
  await next();
};

export const platformOnly: ConsoleMiddleware = async (ctx, next) => {
  if (ctx.state.session?.operator.role !== 'platform') return refusal(ctx, 403, 'Only a platform operator can open this page.');
  await next();
};

/**
 * /console/o/:org: a platform operator may open any organization, an organization admin only
 * their own. Another organization's id, or one that does not exist, gets the same 403 for an
 * admin: the answer does not tell them it exists.
 */
export function orgScope(deps: ConsoleDeps): ConsoleMiddleware {
  return async (ctx, next) => {
    const operator = ctx.state.session!.operator;
    const id = ctx.params.org;
    const allowed = operator.role === 'platform' || operator.organizationId === id;
    if (!allowed) return refusal(ctx, 403, 'You do not have access to this organization.');
    const org = isUuid(id) ? await deps.orm.em.fork().findOne(Organization, { id }, { fields: ['id', 'name', 'plan'] }) : null;
    if (!org) return refusal(ctx, 404, 'No such organization.');
    ctx.state.auth = operatorAuth(org, operator);
    ctx.state.org = ctx.state.auth.organization;
    await next();
  };
}
