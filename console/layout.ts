import type { ParameterizedContext } from 'koa';
import { html, type Html, type Piece } from './html';
import type { ConsoleState } from './state';

/** Every console page's headers: its policy allows the console's own script and style, nothing inline, no framing. */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

export function securityHeaders(ctx: ParameterizedContext, csp = CONSOLE_CSP): void {
  ctx.set('Content-Security-Policy', csp);
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Referrer-Policy', 'same-origin');
  ctx.set('Cache-Control', 'no-store');
}

/** The pages of one organization, in the order the navigation shows them. */
const ORG_PAGES: [string, string][] = [
  ['messages', 'Messages'],
  ['keys', 'Keys'],
  ['domains', 'Domains'],
  ['audience', 'Audience'],
  ['webhooks', 'Webhooks'],
  ['suppressions', 'Suppressions'],
  ['broadcasts', 'Broadcasts'],
  ['automations', 'Automations'],
  ['audit', 'Audit log'],
];

/** Fixed confirmations a page may show after a redirect (`?done=`): a link cannot put words on a page. */
const NOTICES: Record<string, string> = {
  canceled: 'The message was canceled.',
  key_revoked: 'The key was revoked.',
  verify_started: 'Verification started; records are checked again now.',
  domain_updated: 'The domain was updated.',
  topic_created: 'The topic was created.',
  segment_created: 'The segment was created.',
  contact_deleted: 'The contact was deleted.',
  subscriptions_changed: 'The subscriptions were changed.',
  delivery_retried: 'The delivery was queued again.',
  recovered: 'Deliveries since that time were queued again.',
  webhook_enabled: 'The endpoint was enabled again.',
  webhook_updated: 'The endpoint was updated.',
  webhook_created: 'The endpoint was created.',
  suppression_added: 'The address was suppressed.',
  suppression_removed: 'The suppression was removed.',
  broadcast_canceled: 'The broadcast was canceled.',
  run_canceled: 'The run was canceled.',
  organization_created: 'The organization was created.',
  organization_updated: 'The organization was updated.',
  password_changed: 'Your password was changed; other sessions were signed out.',
  totp_enabled: 'Two-factor sign-in is on.',
  totp_disabled: 'Two-factor sign-in is off.',
  warmup_set: 'The warm-up stage was set.',
  transport_set: 'The transport was set.',
  internal_set: 'The organization’s internal flag was set.',
  cloudflare_attached: 'The Cloudflare token was checked and attached; it is stored sealed and not shown again.',
  cloudflare_detached: 'The Cloudflare token was detached.',
  dns_published: 'The records were published to Cloudflare; each shows pending until DNS answers it.',
  dns_checked: 'The published records were looked up in DNS again.',
  mta_sts_mode_set: 'The MTA-STS mode was changed: publish the new _mta-sts record below so senders fetch the policy again.',
  mta_sts_mode_unchanged: 'The MTA-STS policy already had that mode; nothing changed.',
  unconfirmed_closed: 'The selected messages still at sent were closed as unconfirmed.',
  dkim_rotation_started: 'DKIM rotation started: publish the record of the new key below; signing switches once DNS serves it.',
  dkim_rotation_canceled: 'The DKIM rotation was canceled; signing is unchanged.',
  dmarc_source_unauthorized: 'The source was marked unauthorized: the DMARC ramp no longer waits for it to pass.',
  dmarc_source_authorized: 'The source was marked authorized: the DMARC ramp waits for it to pass aligned.',
  dmarc_source_unchanged: 'The source was already marked so; nothing changed.',
  mta_sts_hosted: 'The MTA-STS policy is hosted: publish its records below.',
  dmarc_ramp_started:
    'The DMARC ramp started: publish the _dmarc record below (the ramp publishes it when the zone is connected to Cloudflare).',
  dmarc_step_requested: 'Your request was passed to the DMARC ramp; the page shows its outcome once applied.',
};

export interface PageOptions {
  title: string;
  body: Piece;
  /** The organization page this is (highlights the navigation). */
  current?: string;
  status?: number;
  /** A message above the page: an action that failed. */
  error?: string;
}

/** While no worker polls a task queue the API still accepts mail, which waits: every page says so, and what to run. */
function workersBanner(workers: ConsoleState['workers']): Piece {
  if (workers?.state !== 'none') return '';
  const idle = workers.queues.filter((q) => q.pollers === 0).map((q) => q.name);
  return html`<p class="banner" role="alert">
    No worker is polling the Temporal task ${idle.length > 1 ? 'queues' : 'queue'} ${idle.join(' and ')}: mail is accepted but stays queued
    until one runs. Start <code>svc worker</code> (<code>npm run worker</code>) with this service's <code>TEMPORAL_*</code> settings.
  </p>`;
}

/** A page inside the console: navigation, the operator, sign-out, then the body. */
export function renderPage(ctx: ParameterizedContext<ConsoleState>, opts: PageOptions): void {
  const s = ctx.state.session;
  const org = ctx.state.org;
  const done = typeof ctx.query.done === 'string' ? NOTICES[ctx.query.done] : undefined;
  const csrf = s?.csrf ?? '';
  const base = org ? `/console/o/${org.id}` : '';
  const nav: Html = org
    ? html`<nav class="side" aria-label="${org.name}">
        <ul>
          ${ORG_PAGES.map(
            ([slug, label]) =>
              html`<li><a href="${base}/${slug}" ${opts.current === slug ? html`aria-current="page"` : ''}>${label}</a></li>`,
          )}
        </ul>
      </nav>`
    : html``;
  const top = s
    ? html`<header class="top">
        <a href="/console/overview"><strong>svc console</strong></a>
        ${org ? html`<span>${org.name}</span>` : ''}
        ${s.operator.role === 'platform' ? html`<a href="/console/organizations">Organizations</a> <a href="/console/unconfirmed">Unconfirmed</a> <a href="/console/delivery">Delivery</a>` : ''}
        <span class="who"
          ><a href="/console/account">${s.operator.email}</a>
          <form method="post" action="/console/sign-out" class="inline">
            <input type="hidden" name="_csrf" value="${csrf}" /><button type="submit" class="secondary">Sign out</button>
          </form></span
        >
      </header>`
    : html`<header class="top"><strong>svc console</strong></header>`;
  document(ctx, opts.status ?? 200, opts.title, [
    top,
    nav,
    html`<main id="main">
      ${s ? workersBanner(ctx.state.workers) : ''} ${done ? html`<p class="notice" role="status">${done}</p>` : ''}
      ${opts.error ? html`<p class="error" role="alert">${opts.error}</p>` : ''} ${opts.body}
    </main>`,
  ]);
}

/** The HTML document around a page's content (also for pages outside a session: sign-in, errors). */
export function document(ctx: ParameterizedContext, status: number, title: string, content: Piece): void {
  securityHeaders(ctx);
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width,initial-scale=1" />
        <meta name="robots" content="noindex" />
        <title>${title} · svc console</title>
        <link rel="stylesheet" href="/console/assets/console.css" />
        <script src="/console/assets/console.js" defer></script>
      </head>
      <body>
        <a class="skip" href="#main">Skip to content</a>${content}
      </body>
    </html>`.value;
}

/** A page that says no (403, 404): the same words whether or not the thing exists elsewhere. */
export function refusal(ctx: ParameterizedContext<ConsoleState>, status: number, message: string): void {
  renderPage(ctx, { title: status === 403 ? 'Not allowed' : 'Not found', status, body: html`<h1>${message}</h1>` });
}

/** A column of a list table: its heading, right-aligned (`num`) for figures. */
export type Column = string | { label: string; num: true };

/**
 * A list page's table: a caption, its column headings and its rows, then `empty` (the page's
 * sentence for a list with no rows) when given.
 */
export function listTable(opts: { caption: string; columns: Column[]; rows: Piece; empty?: string }): Html {
  const th = (c: Column) => (typeof c === 'string' ? html`<th scope="col">${c}</th>` : html`<th scope="col" class="num">${c.label}</th>`);
  return html`<table>
      <caption class="muted">
        ${opts.caption}
      </caption>
      <thead>
        <tr>
          ${opts.columns.map(th)}
        </tr>
      </thead>
      <tbody>
        ${opts.rows}
      </tbody>
    </table>
    ${opts.empty ? html`<p class="muted">${opts.empty}</p>` : ''}`;
}

/** After a form's write: 303 See Other, so a reload of the page that follows does not post again. */
export function seeOther(ctx: ParameterizedContext, url: string): void {
  ctx.status = 303;
  ctx.redirect(url);
}

/** The hidden CSRF field every state-changing form carries. */
export const csrfField = (ctx: { state: ConsoleState }) =>
  html`<input type="hidden" name="_csrf" value="${ctx.state.session?.csrf ?? ''}" />`;

/** A date as UTC text in a <time> element. */
export const when = (iso: string | null | undefined) =>
  iso ? html`<time datetime="${iso}">${iso.replace('T', ' ').slice(0, 19)}</time>` : html`<span class="muted">—</span>`;

/** Next/previous links of a cursor-paged list: the API's own cursor, the page's own filters. */
export function pager(path: string, filters: Record<string, string | undefined>, nextCursor: string | null | undefined): Html {
  if (!nextCursor) return html``;
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
  q.set('cursor', nextCursor);
  return html`<p class="pager"><a href="${path}?${q.toString()}" rel="next">Next page</a></p>`;
}
