import type Router from '@koa/router';
import { html, type Html } from '../html';
import { csrfField, pager, refusal, renderPage, when, seeOther, listTable } from '../layout';
import { orgAuth, type ConsoleContext, type ConsoleDeps, type ConsoleState } from '../state';

const RUN_STATUSES = ['running', 'waiting', 'completed', 'canceled', 'failed'];
const CANCELABLE = ['running', 'waiting'];

interface Step {
  type: string;
  then?: Step[];
  else?: Step[];
  [k: string]: unknown;
}

/** The step at a run's path (`steps[2].then[0]`) in a definition; undefined when the path is not in it. */
export function stepAt(steps: Step[], path: string | null): Step | undefined {
  if (!path) return undefined;
  let list: Step[] | undefined = steps;
  let found: Step | undefined;
  for (const part of path.split('.')) {
    const m = /^(steps|then|else)\[(\d+)\]$/.exec(part);
    if (!m || !list) return undefined;
    if (m[1] !== 'steps' && found) list = found[m[1] as 'then' | 'else'];
    found = list?.[Number(m[2])];
    if (!found) return undefined;
    list = undefined;
  }
  return found;
}

const triggerText = (t: Record<string, unknown>) =>
  typeof t.event === 'string'
    ? `event ${t.event}`
    : t.contact_created
      ? 'contact created'
      : `subscribed to topic ${String(t.topic_subscribed)}`;

const runBadge = (s: string) => html`<span class="${s === 'failed' ? 'bad' : s === 'completed' ? 'good' : ''}">${s}</span>`;

/** Where a run is: the step's path, and its type when the run is on the version the page shows. */
function currentStep(run: any, automation: any): Html {
  if (!run.step) return html`<span class="muted">—</span>`;
  const step = run.version === automation.version ? stepAt(automation.steps, run.step) : undefined;
  const waiting = run.waiting_for
    ? html` — waiting for
        <code>${run.waiting_for.event ?? 'its time'}</code>${run.waiting_for.until ? html` until ${when(run.waiting_for.until)}` : ''}`
    : '';
  return html`<code>${run.step}</code>${step ? html` ${step.type}` : ''}${waiting}`;
}

const cancelForm = (ctx: ConsoleContext, action: string) =>
  html`<form method="post" action="${action}" class="inline" data-confirm="Cancel this run?">
    ${csrfField(ctx)}<button class="danger" type="submit">Cancel run</button>
  </form>`;

/**
 * Automations: GET /automations, the detail of GET /automations/:id with its runs
 * (GET /automations/:id/runs, filtered by status, cursor paged) and where each run is, a run's
 * history (GET /automation-runs/:id), and cancel a run (POST /automation-runs/:id/cancel).
 * Added to the broadcasts router, which console/routes.ts mounts.
 */
export function addAutomationRoutes(deps: ConsoleDeps, router: Router<ConsoleState>): void {
  router.get('/console/o/:org/automations', async (ctx) => {
    const a = orgAuth(ctx);
    const base = `/console/o/${a.organization.id}/automations`;
    const res = await deps.api.call(a, 'GET', '/automations', { query: { cursor: ctx.query.cursor as string | undefined } });
    const data = res.ok ? (res.body.data as any[]) : [];
    renderPage(ctx, {
      title: 'Automations',
      current: 'automations',
      status: res.ok ? 200 : res.status,
      error: res.error?.message,
      body: html`<h1>Automations</h1>
        ${listTable({
          caption: 'Newest first',
          columns: ['Created', 'Name', 'Enabled', 'Trigger', { label: 'Steps', num: true }, { label: 'Version', num: true }],
          rows: data.map(
            (x) =>
              html`<tr>
                <td>${when(x.created_at)}</td>
                <td><a href="${base}/${x.id}">${x.name}</a></td>
                <td>${x.enabled ? 'yes' : html`<span class="muted">no</span>`}</td>
                <td>${triggerText(x.trigger)}</td>
                <td class="num">${x.steps.length}</td>
                <td class="num">${x.version}</td>
              </tr>`,
          ),
          empty: res.ok && data.length === 0 ? 'No automations.' : undefined,
        })}
        ${res.ok ? pager(base, {}, res.body.next_cursor) : ''}`,
    });
  });

  async function detail(ctx: ConsoleContext) {
    const a = orgAuth(ctx);
    const id = encodeURIComponent(ctx.params.id);
    const res = await deps.api.call(a, 'GET', `/automations/${id}`);
    if (!res.ok) return refusal(ctx, 404, 'No such automation.');
    const x = res.body;
    const base = `/console/o/${a.organization.id}/automations/${x.id}`;
    const status = typeof ctx.query.status === 'string' ? ctx.query.status : undefined;
    const runs = await deps.api.call(a, 'GET', `/automations/${id}/runs`, {
      query: { status, cursor: ctx.query.cursor as string | undefined },
    });
    const data = runs.ok ? (runs.body.data as any[]) : [];
    renderPage(ctx, {
      title: `Automation ${x.name}`,
      current: 'automations',
      status: runs.ok ? 200 : runs.status,
      error: runs.error?.message,
      body: html`<h1>${x.name}</h1>
        <dl class="facts">
          <dt>ID</dt>
          <dd><code>${x.id}</code></dd>
          <dt>Enabled</dt>
          <dd>${x.enabled ? 'yes' : 'no'}</dd>
          <dt>Trigger</dt>
          <dd>${triggerText(x.trigger)}</dd>
          <dt>Version</dt>
          <dd>${x.version}</dd>
          <dt>Created</dt>
          <dd>${when(x.created_at)}</dd>
          <dt>Updated</dt>
          <dd>${when(x.updated_at)}</dd>
        </dl>
        <details>
          <summary>Steps (version ${x.version})</summary>
          <pre>${JSON.stringify(x.steps, null, 2)}</pre>
        </details>
        <h2>Runs</h2>
        <form method="get" class="filters" role="search" aria-label="Filter runs">
          <label
            >Status
            <select name="status">
              <option value="">any</option>
              ${RUN_STATUSES.map((s) => html`<option ${status === s ? html`selected` : ''}>${s}</option>`)}
            </select></label
          >
          <button type="submit">Filter</button>
        </form>
        ${listTable({
          caption: 'Newest first',
          columns: ['Started', 'Contact', 'Status', 'Current step', { label: 'Version', num: true }, 'Action'],
          rows: data.map(
            (r) =>
              html`<tr>
                <td><a href="${base}/runs/${r.id}">${when(r.created_at)}</a></td>
                <td>${r.contact.email}</td>
                <td>${runBadge(r.status)}${r.reason ? html` <span class="muted">${r.reason}</span>` : ''}</td>
                <td>${currentStep(r, x)}</td>
                <td class="num">${r.version}</td>
                <td>${CANCELABLE.includes(r.status) ? cancelForm(ctx, `${base}/runs/${r.id}/cancel`) : ''}</td>
              </tr>`,
          ),
          empty: runs.ok && data.length === 0 ? `No runs${status ? ` ${status}` : ''}.` : undefined,
        })}
        ${runs.ok ? pager(base, { status }, runs.body.next_cursor) : ''}`,
    });
  }

  router.get('/console/o/:org/automations/:id', (ctx) => detail(ctx));

  async function run(ctx: ConsoleContext, error?: { status: number; message: string }) {
    const a = orgAuth(ctx);
    const res = await deps.api.call(a, 'GET', `/automation-runs/${encodeURIComponent(ctx.params.run)}`);
    if (!res.ok || res.body.automation_id !== ctx.params.id) return refusal(ctx, 404, 'No such run.');
    const r = res.body;
    const auto = await deps.api.call(a, 'GET', `/automations/${encodeURIComponent(ctx.params.id)}`);
    const base = `/console/o/${a.organization.id}/automations/${ctx.params.id}`;
    renderPage(ctx, {
      title: 'Automation run',
      current: 'automations',
      status: error?.status,
      error: error?.message,
      body: html`<h1>Run of ${auto.ok ? auto.body.name : 'a deleted automation'}</h1>
        <p>${auto.ok ? html`<a href="${base}">Back to the automation</a>` : ''}</p>
        <dl class="facts">
          <dt>ID</dt>
          <dd><code>${r.id}</code></dd>
          <dt>Status</dt>
          <dd>${runBadge(r.status)}</dd>
          <dt>Current step</dt>
          <dd>${auto.ok ? currentStep(r, auto.body) : html`<code>${r.step ?? '—'}</code>`}</dd>
          ${
            r.reason
              ? html`<dt>Reason</dt>
                  <dd>${r.reason}</dd>`
              : ''
          }
          <dt>Contact</dt>
          <dd>${r.contact.email}</dd>
          <dt>Version</dt>
          <dd>${r.version}</dd>
          <dt>Trigger</dt>
          <dd><code>${JSON.stringify(r.trigger)}</code></dd>
          <dt>Created</dt>
          <dd>${when(r.created_at)}</dd>
          <dt>Started</dt>
          <dd>${when(r.started_at)}</dd>
          <dt>Finished</dt>
          <dd>${when(r.finished_at)}</dd>
        </dl>
        ${CANCELABLE.includes(r.status) ? cancelForm(ctx, `${base}/runs/${r.id}/cancel`) : ''}
        <h2>History</h2>
        <table>
          <thead>
            <tr>
              <th scope="col">Step</th>
              <th scope="col">Type</th>
              <th scope="col">Began</th>
              <th scope="col">Finished</th>
              <th scope="col">Result</th>
            </tr>
          </thead>
          <tbody>
            ${(r.history as any[]).map(
              (h) =>
                html`<tr>
                  <td><code>${h.step}</code></td>
                  <td>${h.type}</td>
                  <td>${when(h.started_at)}</td>
                  <td>${when(h.finished_at)}</td>
                  <td>
                    ${h.result === undefined ? html`<span class="muted">in progress</span>` : html`<code>${JSON.stringify(h.result)}</code>`}
                  </td>
                </tr>`,
            )}
          </tbody>
        </table>
        ${r.history.length === 0 ? html`<p class="muted">No step has begun.</p>` : ''}`,
    });
  }

  router.get('/console/o/:org/automations/:id/runs/:run', (ctx) => run(ctx));

  router.post('/console/o/:org/automations/:id/runs/:run/cancel', async (ctx) => {
    const a = orgAuth(ctx);
    const found = await deps.api.call(a, 'GET', `/automation-runs/${encodeURIComponent(ctx.params.run)}`);
    if (!found.ok || found.body.automation_id !== ctx.params.id) return refusal(ctx, 404, 'No such run.');
    const res = await deps.api.call(a, 'POST', `/automation-runs/${encodeURIComponent(ctx.params.run)}/cancel`);
    if (!res.ok) return run(ctx, { status: res.status, message: res.error?.message ?? 'The run could not be canceled.' });
    seeOther(ctx, `/console/o/${a.organization.id}/automations/${ctx.params.id}?done=run_canceled`);
  });
}
