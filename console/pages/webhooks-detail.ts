import type Router from '@koa/router';
import { html, type Html } from '../html';
import { csrfField, pager, refusal, renderPage, when, seeOther } from '../layout';
import { field, orgAuth, type ConsoleContext, type ConsoleDeps, type ConsoleState } from '../state';

const STATUSES = ['pending', 'succeeded', 'failed'];

/** Why an endpoint is disabled (db/entities/webhook.ts names the reasons), in words. */
export function disabledBecause(reason: string | null | undefined): string {
  if (reason === 'api') return 'disabled by an operator or through the API';
  if (reason === 'gone') return 'its receiver answered 410 Gone';
  if (reason === 'failing') return 'its deliveries kept failing for 5 days';
  return reason ? `disabled (${reason})` : 'disabled';
}

/** A datetime-local value (no zone) is read as UTC, the zone every time on these pages is shown in. */
const asUtc = (v: string) => (/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(v) ? `${v}${v.length === 16 ? ':00' : ''}Z` : v);

const deliveryStatus = (s: string) => html`<span class="${s === 'failed' ? 'bad' : s === 'succeeded' ? 'good' : ''}">${s}</span>`;

function response(d: any): Html {
  const text = (d.last_response ?? d.last_error ?? '') as string;
  return html`${d.last_status_code ? html`<strong>${d.last_status_code}</strong> ` : ''}${text ? html`<code>${text.length > 300 ? `${text.slice(0, 300)}…` : text}</code>` : ''}`;
}

const secretBlock = (label: string, secret: string) =>
  html`<p class="secret">
    ${label} <code id="webhook-secret">${secret}</code> <button type="button" class="secondary" data-copy="webhook-secret">Copy</button>
  </p>`;

export interface DetailExtra {
  /** A secret just made (creation, rotation): shown in this answer only. */
  secret?: string;
  created?: boolean;
  /** After a rotation: until when the previous secret still signs. */
  previousUntil?: string;
  failed?: { status: number; message: string };
}

/** An endpoint (GET /webhooks/:id) and its deliveries (GET /webhooks/:id/deliveries with its status filter and cursor). */
export async function webhookDetail(ctx: ConsoleContext, deps: ConsoleDeps, extra: DetailExtra = {}): Promise<void> {
  const a = orgAuth(ctx);
  const path = `/webhooks/${encodeURIComponent(ctx.params.id)}`;
  const got = await deps.api.call(a, 'GET', path);
  if (!got.ok) return refusal(ctx, 404, 'No such webhook endpoint.');
  const w = got.body;
  const base = `/console/o/${a.organization.id}/webhooks/${w.id}`;
  // After a post the page shows the deliveries unfiltered; on a GET, the filter and page asked for.
  const filters = { status: ctx.method === 'GET' && typeof ctx.query.status === 'string' ? ctx.query.status : undefined };
  const cursor = ctx.method === 'GET' && typeof ctx.query.cursor === 'string' ? ctx.query.cursor : undefined;
  const list = await deps.api.call(a, 'GET', `${path}/deliveries`, { query: { ...filters, cursor } });
  const deliveries = list.ok ? (list.body.data as any[]) : [];
  const failed = extra.failed ?? (list.ok ? undefined : { status: list.status, message: list.error?.message ?? '' });
  renderPage(ctx, {
    title: `Webhook ${w.url}`,
    current: 'webhooks',
    status: failed?.status,
    error: failed?.message,
    body: html`<p><a href="/console/o/${a.organization.id}/webhooks">← Webhooks</a></p>
      <h1 class="mono">${w.url}</h1>
      ${extra.created ? html`<p class="notice" role="status">The endpoint was created.</p>` : ''}
      ${extra.secret ? secretBlock(extra.created ? 'Its signing secret, shown this once:' : 'The new signing secret, shown this once:', extra.secret) : ''}
      ${extra.previousUntil ? html`<p>The previous secret keeps signing next to the new one until ${when(extra.previousUntil)}.</p>` : ''}
      ${
        w.enabled
          ? ''
          : html`<p class="banner" role="status">
                This endpoint is disabled: ${disabledBecause(w.disabled_reason)}. It gets no deliveries until it is enabled again; then
                recover the failed ones since a time.
              </p>
              <form method="post" action="${base}/enable">${csrfField(ctx)}<button type="submit">Re-enable endpoint</button></form>`
      }
      <dl class="facts">
        <dt>ID</dt>
        <dd><code>${w.id}</code></dd>
        <dt>Events</dt>
        <dd>${w.events ? (w.events as string[]).join(', ') : 'all events'}</dd>
        <dt>Status</dt>
        <dd>${w.enabled ? html`<span class="good">enabled</span>` : html`<span class="bad">disabled</span>`}</dd>
        <dt>Description</dt>
        <dd>${w.description ?? html`<span class="muted">—</span>`}</dd>
        <dt>Created</dt>
        <dd>${when(w.created_at)}</dd>
        <dt>Updated</dt>
        <dd>${when(w.updated_at)}</dd>
      </dl>
      <h2>Signing secret</h2>
      <p>The secret is never shown again after it is made. Rotating makes a new one; the old one keeps signing next to it for 24 hours.</p>
      <form method="post" action="${base}/rotate-secret" data-confirm="Rotate the signing secret?">
        ${csrfField(ctx)}<button type="submit" class="secondary">Rotate secret</button>
      </form>
      ${
        w.enabled
          ? html`<h2>Recover</h2>
              <form method="post" action="${base}/recover" class="filters">
                ${csrfField(ctx)}
                <label>Failed since (UTC) <input type="datetime-local" name="since" required step="1" /></label>
                <button type="submit">Send failed deliveries again</button>
              </form>
              <h2>Disable</h2>
              <form method="post" action="${base}/disable" data-confirm="Disable this endpoint? It gets no deliveries while disabled.">
                ${csrfField(ctx)}<button type="submit" class="danger">Disable endpoint</button>
              </form>`
          : ''
      }
      <h2>Deliveries</h2>
      <form method="get" action="${base}" class="filters" role="search" aria-label="Filter deliveries">
        <label
          >Status
          <select name="status">
            <option value="">any</option>
            ${STATUSES.map((s) => html`<option ${filters.status === s ? html`selected` : ''}>${s}</option>`)}
          </select></label
        >
        <button type="submit">Filter</button>
      </form>
      ${
        deliveries.length
          ? html`<table>
              <caption class="muted">
                Newest first
              </caption>
              <thead>
                <tr>
                  <th scope="col">Created</th>
                  <th scope="col">Event</th>
                  <th scope="col">Status</th>
                  <th scope="col" class="num">Attempts</th>
                  <th scope="col">Last response</th>
                  <th scope="col">Next attempt</th>
                  <th scope="col">Action</th>
                </tr>
              </thead>
              <tbody>
                ${deliveries.map(
                  (d) =>
                    html`<tr>
                      <td>${when(d.created_at)}</td>
                      <td>${d.event_type}</td>
                      <td>${deliveryStatus(d.status)}</td>
                      <td class="num">${d.attempts}</td>
                      <td>${response(d)}</td>
                      <td>${when(d.next_attempt_at)}</td>
                      <td>
                        ${w.enabled ? html`<form method="post" action="${base}/deliveries/${d.id}/retry" class="inline">${csrfField(ctx)}<button type="submit" class="secondary" aria-label="Retry delivery ${d.id}">Retry</button></form>` : ''}
                      </td>
                    </tr>`,
                )}
              </tbody>
            </table>`
          : list.ok
            ? html`<p class="muted">No deliveries${filters.status ? ' with that status' : ''}.</p>`
            : ''
      }
      ${list.ok ? pager(base, filters, list.body.next_cursor) : ''}`,
  });
}

/** The endpoint's writes, each the API's own route: retry one, recover since, rotate, enable, disable. */
export function detailActions(router: Router<ConsoleState>, deps: ConsoleDeps): Router<ConsoleState> {
  const path = (ctx: ConsoleContext) => `/webhooks/${encodeURIComponent(ctx.params.id)}`;
  const back = (ctx: ConsoleContext, done: string) => {
    seeOther(ctx, `/console/o/${orgAuth(ctx).organization.id}/webhooks/${ctx.params.id}?done=${done}`);
  };
  // The endpoint's page with the API's words (a missing endpoint: the page's own 404).
  const refused = (ctx: ConsoleContext, res: { status: number; error?: { message: string } }, fallback: string) =>
    webhookDetail(ctx, deps, { failed: { status: res.status, message: res.error?.message ?? fallback } });

  router.post('/console/o/:org/webhooks/:id/deliveries/:delivery_id/retry', async (ctx) => {
    const res = await deps.api.call(orgAuth(ctx), 'POST', `${path(ctx)}/deliveries/${encodeURIComponent(ctx.params.delivery_id)}/retry`);
    if (!res.ok) return refused(ctx, res, 'The delivery was not queued again.');
    back(ctx, 'delivery_retried');
  });

  router.post('/console/o/:org/webhooks/:id/recover', async (ctx) => {
    const res = await deps.api.call(orgAuth(ctx), 'POST', `${path(ctx)}/recover`, { body: { since: asUtc(field(ctx, 'since')) } });
    if (!res.ok) return refused(ctx, res, 'Nothing was recovered.');
    back(ctx, 'recovered');
  });

  router.post('/console/o/:org/webhooks/:id/rotate-secret', async (ctx) => {
    const res = await deps.api.call(orgAuth(ctx), 'POST', `${path(ctx)}/rotate-secret`);
    if (!res.ok) return refused(ctx, res, 'The secret was not rotated.');
    // No redirect: the new secret is in this answer only.
    await webhookDetail(ctx, deps, { secret: res.body.secret, previousUntil: res.body.previous_secret_expires_at });
  });

  for (const [action, enabled, done] of [
    ['enable', true, 'webhook_enabled'],
    ['disable', false, 'webhook_updated'],
  ] as const) {
    router.post(`/console/o/:org/webhooks/:id/${action}`, async (ctx) => {
      const res = await deps.api.call(orgAuth(ctx), 'PATCH', path(ctx), { body: { enabled } });
      if (!res.ok) return refused(ctx, res, 'The endpoint was not changed.');
      back(ctx, done);
    });
  }
  return router;
}
