import { WEBHOOK_EVENTS } from '../../core/webhooks/events';
import { html } from '../html';
import { csrfField, pager, renderPage, when } from '../layout';
import { consoleRouter, field, orgAuth, type ConsoleContext, type ConsoleDeps } from '../state';
import { detailActions, disabledBecause, webhookDetail } from './webhooks-detail';

interface Typed {
  url: string;
  description: string;
  events: string[];
}

/**
 * Webhooks: the endpoints (GET /webhooks with its cursor) and a form that registers one
 * (POST /webhooks; its signing secret is shown in the answer to the post, once). Each endpoint's
 * page, its deliveries and actions: webhooks-detail.ts.
 */
export function webhookRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  async function list(ctx: ConsoleContext, failed?: { status: number; message: string }, typed?: Typed) {
    const a = orgAuth(ctx);
    const base = `/console/o/${a.organization.id}/webhooks`;
    const cursor = typeof ctx.query.cursor === 'string' ? ctx.query.cursor : undefined;
    const res = await deps.api.call(a, 'GET', '/webhooks', { query: { cursor } });
    const rows = res.ok ? (res.body.data as any[]) : [];
    renderPage(ctx, {
      title: 'Webhooks',
      current: 'webhooks',
      status: failed?.status ?? (res.ok ? 200 : res.status),
      error: failed?.message ?? res.error?.message,
      body: html`<h1>Webhooks</h1>
        <h2>Endpoints</h2>
        ${
          rows.length
            ? html`<table>
                <thead>
                  <tr>
                    <th scope="col">URL</th>
                    <th scope="col">Events</th>
                    <th scope="col">Status</th>
                    <th scope="col">Description</th>
                    <th scope="col">Created</th>
                  </tr>
                </thead>
                <tbody>
                  ${rows.map(
                    (w) =>
                      html`<tr>
                        <td><a href="${base}/${w.id}" class="mono">${w.url}</a></td>
                        <td>${w.events ? (w.events as string[]).join(', ') : html`<span class="muted">all events</span>`}</td>
                        <td>
                          ${w.enabled ? html`<span class="good">enabled</span>` : html`<span class="bad">disabled</span> — ${disabledBecause(w.disabled_reason)}`}
                        </td>
                        <td>${w.description ?? ''}</td>
                        <td>${when(w.created_at)}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
            : res.ok
              ? html`<p class="muted">No endpoints yet.</p>`
              : ''
        }
        ${res.ok ? pager(base, {}, res.body.next_cursor) : ''}
        <h2>Add an endpoint</h2>
        <form method="post" action="${base}" class="stack">
          ${csrfField(ctx)}
          <label>URL <input type="url" name="url" required maxlength="2048" value="${typed?.url ?? ''}" /></label>
          <label>Description <input name="description" maxlength="500" value="${typed?.description ?? ''}" /></label>
          <fieldset>
            <legend>Events (none checked: every event)</legend>
            ${WEBHOOK_EVENTS.map(
              (e) =>
                html`<label class="check"
                  ><input type="checkbox" name="events" value="${e}" ${typed?.events.includes(e) ? html`checked` : ''} /> ${e}</label
                >`,
            )}
          </fieldset>
          <button type="submit">Add endpoint</button>
        </form>`,
    });
  }

  router.get('/console/o/:org/webhooks', (ctx) => list(ctx));

  router.post('/console/o/:org/webhooks', async (ctx) => {
    const a = orgAuth(ctx);
    const typed: Typed = { url: field(ctx, 'url'), description: field(ctx, 'description'), events: ctx.state.form!.getAll('events') };
    const res = await deps.api.call(a, 'POST', '/webhooks', {
      body: {
        url: typed.url,
        ...(typed.description ? { description: typed.description } : {}),
        ...(typed.events.length ? { events: typed.events } : {}),
      },
    });
    if (!res.ok) return list(ctx, { status: res.status, message: res.error?.message ?? 'The endpoint was not added.' }, typed);
    // The secret is in this answer only: no redirect, the page of the new endpoint shows it once.
    ctx.params.id = res.body.id;
    await webhookDetail(ctx, deps, { secret: res.body.secret, created: true });
  });

  router.get('/console/o/:org/webhooks/:id', (ctx) => webhookDetail(ctx, deps));
  return detailActions(router, deps);
}
