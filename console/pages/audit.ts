import { html, query, type Html } from '../html';
import { pager, renderPage, when, listTable } from '../layout';
import { consoleRouter, orgAuth, type ConsoleDeps } from '../state';

interface AuditEntryView {
  id: string;
  action: string;
  actor: string;
  target: { type: string; id: string };
  details: Record<string, unknown>;
  created_at: string;
}

/** A target the console has a page for links to it; any other shows as type and id. */
function target(org: string, e: AuditEntryView): Html {
  const { type, id } = e.target;
  const base = `/console/o/${org}`;
  const automationId = typeof e.details?.automation_id === 'string' ? e.details.automation_id : undefined;
  const href =
    type === 'email'
      ? `${base}/messages/${id}`
      : type === 'broadcast'
        ? `${base}/broadcasts/${id}`
        : type === 'automation'
          ? `${base}/automations/${id}`
          : type === 'automation_run' && automationId
            ? `${base}/automations/${automationId}/runs/${id}`
            : undefined;
  const text = html`${type} <code>${id}</code>`;
  return href ? html`<a href="${href}">${text}</a>` : text;
}

/** The organization's audit log: GET /audit-log with its actor and action filters and its cursor. */
export function auditRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  router.get('/console/o/:org/audit', async (ctx) => {
    const a = orgAuth(ctx);
    const base = `/console/o/${a.organization.id}/audit`;
    const q = (k: string) => (typeof ctx.query[k] === 'string' ? (ctx.query[k] as string).trim() : undefined) || undefined;
    const f = { actor: q('actor'), action: q('action') };
    const res = await deps.api.call(a, 'GET', '/audit-log', { query: { ...f, cursor: q('cursor') } });
    const data = res.ok ? (res.body.data as AuditEntryView[]) : [];
    renderPage(ctx, {
      title: 'Audit log',
      current: 'audit',
      status: res.ok ? 200 : res.status,
      error: res.error?.message,
      body: html`<h1>Audit log</h1>
        <form method="get" class="filters" role="search" aria-label="Filter the audit log">
          <label
            >Actor <input name="actor" value="${f.actor ?? ''}" placeholder="console:ops@example.com" aria-describedby="actor-hint"
          /></label>
          <label>Action <input name="action" value="${f.action ?? ''}" placeholder="broadcast.canceled" /></label>
          <button type="submit">Filter</button>
          ${f.actor || f.action ? html`<a href="${base}">Clear filters</a>` : ''}
        </form>
        <p id="actor-hint" class="muted">
          Actor is <code>key:&lt;key id&gt;</code>, <code>console:&lt;operator email&gt;</code> or <code>operator</code> (a change made with
          svc).
        </p>
        ${listTable({
          caption: 'Newest first',
          columns: ['Time', 'Actor', 'Action', 'Target', 'Details'],
          rows: data.map(
            (e) =>
              html`<tr>
                <td>${when(e.created_at)}</td>
                <td><a href="${base}${query({ actor: e.actor })}" title="Only this actor">${e.actor}</a></td>
                <td><a href="${base}${query({ action: e.action })}" title="Only this action">${e.action}</a></td>
                <td>${target(a.organization.id, e)}</td>
                <td>
                  ${e.details && Object.keys(e.details).length ? html`<code>${JSON.stringify(e.details)}</code>` : html`<span class="muted">—</span>`}
                </td>
              </tr>`,
          ),
          empty: res.ok && data.length === 0 ? 'No entries match.' : undefined,
        })}
        ${res.ok ? pager(base, f, res.body.next_cursor) : ''}`,
    });
  });

  return router;
}
