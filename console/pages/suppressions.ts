import { html } from '../html';
import { csrfField, pager, renderPage, when, seeOther, listTable } from '../layout';
import { consoleRouter, field, orgAuth, type ConsoleContext, type ConsoleDeps } from '../state';

interface SuppressionView {
  id: string;
  email: string;
  reason: string;
  email_id: string | null;
  created_at: string;
}

const REASONS = ['bounce', 'complaint', 'manual'] as const;

const filtersOf = (ctx: ConsoleContext) => ({
  email: typeof ctx.query.email === 'string' ? ctx.query.email.trim() : undefined,
  reason: typeof ctx.query.reason === 'string' ? ctx.query.reason : undefined,
});

/**
 * Suppressions: the API's GET /suppressions (filters `email`, exact address, and `reason`; cursor
 * paging), POST /suppressions (an address added here is listed with reason `manual`) and
 * DELETE /suppressions/:email with the operator's reason as its `note`, which the audit row keeps
 * beside the address and the reason it was listed for.
 */
export function suppressionRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  async function list(ctx: ConsoleContext, opts: { status?: number; error?: string; adding?: string } = {}) {
    const a = orgAuth(ctx);
    const base = `/console/o/${a.organization.id}/suppressions`;
    const f = filtersOf(ctx);
    const res = await deps.api.call(a, 'GET', '/suppressions', { query: { ...f, cursor: ctx.query.cursor as string | undefined } });
    const rows = res.ok ? (res.body.data as SuppressionView[]) : [];
    renderPage(ctx, {
      title: 'Suppressions',
      current: 'suppressions',
      status: opts.status ?? (res.ok ? 200 : res.status),
      error: opts.error ?? res.error?.message,
      body: html`<h1>Suppressions</h1>
        <p>Mail to a suppressed address is not sent. Bounces and complaints add addresses; so can you.</p>
        <form method="get" action="${base}" class="filters" role="search" aria-label="Search suppressions">
          <label>Email (exact address) <input type="search" name="email" value="${f.email ?? ''}" /></label>
          <label
            >Reason
            <select name="reason">
              <option value="">any</option>
              ${REASONS.map((r) => html`<option ${f.reason === r ? html`selected` : ''}>${r}</option>`)}
            </select></label
          >
          <button type="submit">Search</button>
        </form>
        ${listTable({
          caption: 'Newest first',
          columns: ['Email', 'Reason', 'Source message', 'Added', 'Remove'],
          rows: rows.map(
            (s) =>
              html`<tr>
                <td>${s.email}</td>
                <td>${s.reason}</td>
                <td>
                  ${s.email_id ? html`<a href="/console/o/${a.organization.id}/messages/${s.email_id}">message</a>` : html`<span class="muted">—</span>`}
                </td>
                <td>${when(s.created_at)}</td>
                <td>
                  <form
                    method="post"
                    action="${base}/remove"
                    class="inline"
                    data-confirm="Remove ${s.email} from the suppression list? Mail to it will be sent again."
                  >
                    ${csrfField(ctx)} <input type="hidden" name="email" value="${s.email}" />
                    <label class="check"
                      >Reason <input name="note" required maxlength="500" aria-label="Reason for removing ${s.email}"
                    /></label>
                    <button type="submit" class="danger" aria-label="Remove ${s.email}">Remove</button>
                  </form>
                </td>
              </tr>`,
          ),
          empty: res.ok && rows.length === 0 ? 'No suppressions match.' : undefined,
        })}
        ${res.ok ? pager(base, f, res.body.next_cursor) : ''}
        <h2>Add an address</h2>
        <form method="post" action="${base}" class="stack">
          ${csrfField(ctx)}
          <label>Email <input type="email" name="email" value="${opts.adding ?? ''}" required maxlength="254" /></label>
          <p class="muted">Listed with reason <code>manual</code>.</p>
          <button type="submit">Suppress address</button>
        </form>`,
    });
  }

  router.get('/console/o/:org/suppressions', (ctx) => list(ctx));

  router.post('/console/o/:org/suppressions', async (ctx) => {
    const a = orgAuth(ctx);
    const email = field(ctx, 'email');
    const res = await deps.api.call(a, 'POST', '/suppressions', { body: { email } });
    if (!res.ok) return list(ctx, { status: res.status, error: res.error?.message ?? 'The address could not be added.', adding: email });
    seeOther(ctx, `/console/o/${a.organization.id}/suppressions?done=suppression_added`);
  });

  router.post('/console/o/:org/suppressions/remove', async (ctx) => {
    const a = orgAuth(ctx);
    const email = field(ctx, 'email');
    // The reason is kept in the audit row (the API's `note`).
    const res = await deps.api.call(a, 'DELETE', `/suppressions/${encodeURIComponent(email)}`, { query: { note: field(ctx, 'note') } });
    if (!res.ok) return list(ctx, { status: res.status, error: res.error?.message ?? 'The suppression could not be removed.' });
    seeOther(ctx, `/console/o/${a.organization.id}/suppressions?done=suppression_removed`);
  });

  return router;
}
