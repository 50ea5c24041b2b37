import { EMAIL_STATUSES } from '../../core/emails/status';
import { html, type Html } from '../html';
import { csrfField, pager, refusal, renderPage, securityHeaders, when, seeOther, listTable } from '../layout';
import { consoleRouter, orgAuth, type ConsoleContext, type ConsoleDeps } from '../state';

interface EmailEventView {
  type: string;
  recipient: string | null;
  at: string;
  bounce_type?: string;
  detail?: string;
  url?: string;
}

const FILTERS = ['status', 'to', 'kind', 'mode', 'since', 'until'] as const;

const filtersOf = (ctx: ConsoleContext) =>
  Object.fromEntries(FILTERS.map((f) => [f, typeof ctx.query[f] === 'string' ? (ctx.query[f] as string) : undefined])) as Record<
    (typeof FILTERS)[number],
    string | undefined
  >;

/** A datetime-local value (no zone) is read as UTC, the zone every time on these pages is shown in. */
const asUtc = (v: string | undefined) =>
  v && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(v) ? `${v}${v.length === 16 ? ':00' : ''}Z` : v;

const statusBadge = (s: string) =>
  html`<span class="${['bounced', 'failed', 'complained'].includes(s) ? 'bad' : s === 'delivered' ? 'good' : ''}">${s}</span>`;

/** Messages: the API's GET /emails with its filters and cursor, the detail of GET /emails/:id, cancel. */
export function messageRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  router.get('/console/o/:org/messages', async (ctx) => {
    const a = orgAuth(ctx);
    const f = filtersOf(ctx);
    const base = `/console/o/${a.organization.id}/messages`;
    const res = await deps.api.call(a, 'GET', '/emails', {
      query: { ...f, since: asUtc(f.since), until: asUtc(f.until), cursor: ctx.query.cursor as string | undefined },
    });
    const rows: Html = res.ok
      ? html`${(res.body.data as any[]).map(
          (m) =>
            html`<tr>
              <td>${when(m.created_at)}</td>
              <td><a href="${base}/${m.id}">${m.subject || '(no subject)'}</a></td>
              <td>${(m.to as string[]).join(', ')}</td>
              <td>${statusBadge(m.last_event)}</td>
              <td>${m.kind ?? ''}</td>
              <td>${m.mode}</td>
              <td>${m.source}</td>
            </tr>`,
        )}`
      : html``;
    renderPage(ctx, {
      title: 'Messages',
      current: 'messages',
      status: res.ok ? 200 : res.status,
      error: res.error?.message,
      body: html`<h1>Messages</h1>
        <form method="get" class="filters" role="search" aria-label="Filter messages">
          <label
            >Status
            <select name="status">
              <option value="">any</option>
              ${EMAIL_STATUSES.map((s) => html`<option ${f.status === s ? html`selected` : ''}>${s}</option>`)}
            </select></label
          >
          <label>Recipient <input type="search" name="to" value="${f.to ?? ''}" /></label>
          <label>Kind <input name="kind" value="${f.kind ?? ''}" size="10" /></label>
          <label
            >Mode
            <select name="mode">
              <option value="">any</option>
              ${['live', 'test'].map((m) => html`<option ${f.mode === m ? html`selected` : ''}>${m}</option>`)}
            </select></label
          >
          <label>Since (UTC) <input type="datetime-local" name="since" value="${f.since ?? ''}" /></label>
          <label>Until (UTC) <input type="datetime-local" name="until" value="${f.until ?? ''}" /></label>
          <button type="submit">Filter</button>
        </form>
        ${listTable({
          caption: 'Newest first',
          columns: ['Created', 'Subject', 'To', 'Status', 'Kind', 'Mode', 'Source'],
          rows,
          empty: res.ok && res.body.data.length === 0 ? 'No messages match.' : undefined,
        })}
        ${res.ok ? pager(base, f, res.body.next_cursor) : ''}`,
    });
  });

  async function detail(ctx: ConsoleContext, error?: { status: number; message: string }) {
    const a = orgAuth(ctx);
    const res = await deps.api.call(a, 'GET', `/emails/${encodeURIComponent(ctx.params.id)}`);
    if (!res.ok) return refusal(ctx, 404, 'No such message.');
    const m = res.body;
    const base = `/console/o/${a.organization.id}/messages/${m.id}`;
    const images = ctx.query.images === '1';
    const byRecipient = new Map<string, EmailEventView[]>();
    for (const e of m.events as EmailEventView[]) {
      const k = e.recipient ?? '(message)';
      byRecipient.set(k, [...(byRecipient.get(k) ?? []), e]);
    }
    const headers = Object.entries((m.headers ?? {}) as Record<string, string>);
    renderPage(ctx, {
      title: `Message ${m.subject ?? ''}`,
      current: 'messages',
      status: error?.status,
      error: error?.message,
      body: html`<h1>${m.subject || '(no subject)'}</h1>
        <dl class="facts">
          <dt>ID</dt>
          <dd><code>${m.id}</code></dd>
          <dt>From</dt>
          <dd>${m.from}</dd>
          <dt>To</dt>
          <dd>${(m.to as string[]).join(', ')}</dd>
          ${
            m.cc?.length
              ? html`<dt>Cc</dt>
                  <dd>${m.cc.join(', ')}</dd>`
              : ''
          }${
            m.bcc?.length
              ? html`<dt>Bcc</dt>
                  <dd>${m.bcc.join(', ')}</dd>`
              : ''
          }
          <dt>Status</dt>
          <dd>
            ${statusBadge(m.last_event)}${m.waiting ? html` — waiting: ${m.waiting.reason}${m.waiting.until ? html` until ${when(m.waiting.until)}` : ''}${m.waiting.reply ? html` (last reply: <code>${m.waiting.reply}</code>)` : ''}` : ''}
          </dd>
          <dt>Kind / mode / source</dt>
          <dd>${m.kind ?? '—'} / ${m.mode} / ${m.source}</dd>
          <dt>Created</dt>
          <dd>${when(m.created_at)}</dd>
          <dt>Scheduled</dt>
          <dd>${when(m.scheduled_at)}</dd>
          <dt>Sent</dt>
          <dd>${when(m.sent_at)}</dd>
          <dt>Tags</dt>
          <dd>${(m.tags ?? []).map((t: { name: string; value: string }) => html`<code>${t.name}=${t.value}</code> `)}</dd>
        </dl>
        ${m.last_event === 'queued' ? html`<form method="post" action="${base}/cancel" data-confirm="Cancel this message?">${csrfField(ctx)}<button class="danger" type="submit">Cancel message</button></form>` : ''}
        <h2>Events</h2>
        ${[...byRecipient].map(
          ([r, events]) =>
            html`<h3>${r}</h3>
              <table>
                <thead>
                  <tr>
                    <th scope="col">At</th>
                    <th scope="col">Event</th>
                    <th scope="col">Detail</th>
                  </tr>
                </thead>
                <tbody>
                  ${events.map(
                    (e) =>
                      html`<tr>
                        <td>${when(e.at)}</td>
                        <td>${e.type}${e.bounce_type ? html` (${e.bounce_type})` : ''}</td>
                        <td>${e.detail ?? ''}${e.url ? html` <code>${e.url}</code>` : ''}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`,
        )}
        <h2>Headers</h2>
        ${
          headers.length
            ? html`<table>
                <tbody>
                  ${headers.map(
                    ([k, v]) =>
                      html`<tr>
                        <th scope="row">${k}</th>
                        <td class="mono">${v}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
            : html`<p class="muted">No custom headers.</p>`
        }
        <h2>Attachments</h2>
        ${
          m.attachments.length
            ? html`<ul>
                ${m.attachments.map((x: { filename: string; content_type: string; size: number }) => html`<li>${x.filename} <span class="muted">${x.content_type}, ${x.size} bytes</span></li>`)}
              </ul>`
            : html`<p class="muted">None.</p>`
        }
        <h2>Body</h2>
        <p>
          ${images ? html`Remote images are shown. <a href="${base}">Block them</a>` : html`Remote images are blocked. <a href="${base}?images=1">Show remote images</a>`}
        </p>
        <iframe class="preview" title="Message body preview" sandbox="" src="${base}/preview${images ? '?images=1' : ''}"></iframe>
        ${
          m.text
            ? html`<details>
                <summary>Plain text</summary>
                <pre>${m.text}</pre>
              </details>`
            : ''
        }`,
    });
  }

  router.get('/console/o/:org/messages/:id', (ctx) => detail(ctx));

  /**
   * The body, for the sandboxed iframe only: an untrusted HTML document. Its own policy runs no
   * script and, until the operator asks, loads nothing remote (no open pixel, no tracking fetch);
   * `sandbox` again in the policy, so opened on its own it is no more trusted than in the frame.
   */
  router.get('/console/o/:org/messages/:id/preview', async (ctx) => {
    const a = orgAuth(ctx);
    const res = await deps.api.call(a, 'GET', `/emails/${encodeURIComponent(ctx.params.id)}`);
    if (!res.ok) return refusal(ctx, 404, 'No such message.');
    const images = ctx.query.images === '1' ? ' https: http:' : '';
    securityHeaders(
      ctx,
      `sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:${images}; font-src data:; frame-ancestors 'self'`,
    );
    ctx.set('X-Frame-Options', 'SAMEORIGIN');
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = res.body.html ?? html`<pre>${res.body.text ?? ''}</pre>`.value;
  });

  router.post('/console/o/:org/messages/:id/cancel', async (ctx) => {
    const a = orgAuth(ctx);
    const res = await deps.api.call(a, 'POST', `/emails/${encodeURIComponent(ctx.params.id)}/cancel`);
    if (!res.ok) return detail(ctx, { status: res.status, message: res.error?.message ?? 'The message could not be canceled.' });
    seeOther(ctx, `/console/o/${a.organization.id}/messages/${ctx.params.id}?done=canceled`);
  });

  return router;
}
