import { html, type Html } from '../html';
import { csrfField, pager, refusal, renderPage, when, seeOther, listTable } from '../layout';
import { consoleRouter, orgAuth, type ConsoleContext, type ConsoleDeps } from '../state';
import { addAutomationRoutes } from './automations';

interface BroadcastProgress {
  queued: number;
  sent: number;
  delivered: number;
  bounced: number;
  complained: number;
  unsubscribed: number;
  suppressed: number;
  failed: number;
  canceled: number;
}

/** The counts in the order a person reads them; `unsubscribed` overlays the others (a sent message can be unsubscribed from). */
const COUNTS: (keyof BroadcastProgress)[] = [
  'queued',
  'sent',
  'delivered',
  'bounced',
  'complained',
  'unsubscribed',
  'suppressed',
  'failed',
  'canceled',
];

const CANCELABLE = ['queued', 'sending'];

const statusBadge = (s: string) => html`<span class="${s === 'failed' ? 'bad' : s === 'sent' ? 'good' : ''}">${s}</span>`;

/** How far the fan-out has come: every message no longer waiting to leave, out of the frozen audience. */
function progressOf(b: { recipients: number | null; progress: BroadcastProgress }): Html {
  const p = b.progress;
  const done = p.sent + p.delivered + p.bounced + p.complained + p.suppressed + p.failed + p.canceled;
  if (b.recipients === null) return html`<span class="muted">audience not frozen yet</span>`;
  const total = Math.max(b.recipients, done + p.queued);
  return html`<progress value="${done}" max="${total || 1}" aria-label="Progress">${done} of ${total}</progress>
    <span>${done} of ${total} processed</span>`;
}

const countsText = (p: BroadcastProgress) =>
  COUNTS.filter((k) => p[k] > 0)
    .map((k) => `${p[k]} ${k}`)
    .join(', ') || 'none yet';

/**
 * Broadcasts: GET /broadcasts (cursor paged) with each one's progress, the detail of
 * GET /broadcasts/:id, and cancel (POST /broadcasts/:id/cancel). The automation pages are added to
 * the same router (console/pages/automations.ts): console/routes.ts mounts this one module for both.
 */
export function broadcastRoutes(deps: ConsoleDeps) {
  const router = consoleRouter();

  router.get('/console/o/:org/broadcasts', async (ctx) => {
    const a = orgAuth(ctx);
    const base = `/console/o/${a.organization.id}/broadcasts`;
    const res = await deps.api.call(a, 'GET', '/broadcasts', { query: { cursor: ctx.query.cursor as string | undefined } });
    const data = res.ok ? (res.body.data as any[]) : [];
    renderPage(ctx, {
      title: 'Broadcasts',
      current: 'broadcasts',
      status: res.ok ? 200 : res.status,
      error: res.error?.message,
      body: html`<h1>Broadcasts</h1>
        ${listTable({
          caption: 'Newest first',
          columns: ['Created', 'Name', 'Status', 'Progress', 'Counts', 'Scheduled'],
          rows: data.map(
            (b) =>
              html`<tr>
                <td>${when(b.created_at)}</td>
                <td><a href="${base}/${b.id}">${b.name || b.subject || '(unnamed)'}</a></td>
                <td>${statusBadge(b.status)}</td>
                <td>${progressOf(b)}</td>
                <td>${countsText(b.progress)}</td>
                <td>${when(b.scheduled_at)}</td>
              </tr>`,
          ),
          empty: res.ok && data.length === 0 ? 'No broadcasts.' : undefined,
        })}
        ${res.ok ? pager(base, {}, res.body.next_cursor) : ''}`,
    });
  });

  async function detail(ctx: ConsoleContext, error?: { status: number; message: string }) {
    const a = orgAuth(ctx);
    const res = await deps.api.call(a, 'GET', `/broadcasts/${encodeURIComponent(ctx.params.id)}`);
    if (!res.ok) return refusal(ctx, 404, 'No such broadcast.');
    const b = res.body;
    const base = `/console/o/${a.organization.id}/broadcasts/${b.id}`;
    renderPage(ctx, {
      title: `Broadcast ${b.name ?? ''}`,
      current: 'broadcasts',
      status: error?.status,
      error: error?.message,
      body: html`<h1>${b.name || b.subject || 'Broadcast'}</h1>
        <dl class="facts">
          <dt>ID</dt>
          <dd><code>${b.id}</code></dd>
          <dt>Status</dt>
          <dd>${statusBadge(b.status)}</dd>
          <dt>From</dt>
          <dd>${b.from}</dd>
          <dt>Segment</dt>
          <dd><code>${b.segment_id}</code></dd>
          <dt>Topic</dt>
          <dd>${b.topic ?? '—'}</dd>
          <dt>Kind</dt>
          <dd>${b.kind}</dd>
          <dt>Content</dt>
          <dd>${b.template ? html`template <code>${b.template.id}</code> version ${b.template.version}` : b.subject}</dd>
          <dt>Recipients</dt>
          <dd>${b.recipients ?? '—'}</dd>
          <dt>Progress</dt>
          <dd>${progressOf(b)}</dd>
          ${
            b.failure
              ? html`<dt>Failure</dt>
                  <dd class="bad">${b.failure}</dd>`
              : ''
          }
          <dt>Created</dt>
          <dd>${when(b.created_at)}</dd>
          <dt>Scheduled</dt>
          <dd>${when(b.scheduled_at)}</dd>
          <dt>Started</dt>
          <dd>${when(b.started_at)}</dd>
          <dt>Enqueued</dt>
          <dd>${when(b.enqueued_at)}</dd>
          <dt>Canceled</dt>
          <dd>${when(b.canceled_at)}</dd>
        </dl>
        <h2>Messages by status</h2>
        <table>
          <thead>
            <tr>
              ${COUNTS.map((k) => html`<th scope="col" class="num">${k}</th>`)}
            </tr>
          </thead>
          <tbody>
            <tr>
              ${COUNTS.map((k) => html`<td class="num">${b.progress[k]}</td>`)}
            </tr>
          </tbody>
        </table>
        ${
          CANCELABLE.includes(b.status)
            ? html`<form
                method="post"
                action="${base}/cancel"
                data-confirm="Cancel this broadcast? Messages not yet picked up will not be sent."
              >
                ${csrfField(ctx)}<button class="danger" type="submit">Cancel broadcast</button>
              </form>`
            : ''
        }`,
    });
  }

  router.get('/console/o/:org/broadcasts/:id', (ctx) => detail(ctx));

  router.post('/console/o/:org/broadcasts/:id/cancel', async (ctx) => {
    const a = orgAuth(ctx);
    const res = await deps.api.call(a, 'POST', `/broadcasts/${encodeURIComponent(ctx.params.id)}/cancel`);
    if (!res.ok) return detail(ctx, { status: res.status, message: res.error?.message ?? 'The broadcast could not be canceled.' });
    seeOther(ctx, `/console/o/${a.organization.id}/broadcasts/${ctx.params.id}?done=broadcast_canceled`);
  });

  addAutomationRoutes(deps, router);
  return router;
}
